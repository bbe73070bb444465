package api

import (
	"errors"
	"net/http"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/registry"
)

// newAdmin builds the management use-cases over the database (none: DB nil) and the one
// list of registries, Deps.Registries, that a write is applied to.
func newAdmin(d Deps) *mgmt.Admin {
	sinks := make([]mgmt.Sink, 0, len(d.Registries))
	for _, r := range d.Registries {
		sinks = append(sinks, r)
	}
	return mgmt.New(mgmt.Deps{Store: d.DB, Router: d.Router, Guardrails: d.Guardrails, Agents: d.Agents, Supported: d.Supported, Registries: sinks, Deployments: d.Deployments})
}

var _ mgmt.Sink = registry.Info(nil)

// adminError maps the use-cases' typed errors to their status, the message as the use-case
// words it (nil: err is none of them). The route decides the envelope (errorHandler).
func adminError(err error) *Error {
	var nf *mgmt.NotFound
	var cf *mgmt.Conflict
	var in *mgmt.Invalid
	var fb *mgmt.Forbidden
	var un *mgmt.Unavailable
	switch {
	case errors.As(err, &nf):
		return errf(http.StatusNotFound, "not_found_error", "%s", nf.Msg)
	case errors.As(err, &cf):
		return errf(http.StatusConflict, "conflict_error", "%s", cf.Msg)
	case errors.As(err, &in):
		return badRequest("%s", in.Msg)
	case errors.As(err, &fb):
		return errf(http.StatusForbidden, "permission_error", "%s", fb.Msg)
	case errors.As(err, &un):
		return errf(http.StatusServiceUnavailable, "service_unavailable", "%s", un.Msg)
	}
	return nil
}
