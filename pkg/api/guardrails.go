package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sort"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
)

// Guardrail management (LiteLLM proxy litellm/proxy/guardrails/guardrail_endpoints.py):
//
//	POST   /guardrails                      {"guardrail": {"guardrail_name", "litellm_params", "guardrail_info"?, "status"?}}
//	GET    /guardrails/list                 {"guardrails": [row...]}   (also /v2/guardrails/list)
//	GET    /guardrails/{id}                 row                        (also /guardrails/{id}/info)
//	PUT    /guardrails/{id}                 {"guardrail": {...}}       replace (status kept unless given)
//	PATCH  /guardrails/{id}                 {"guardrail_name"?, "litellm_params"?, "guardrail_info"?, "default_on"?, "status"?}
//	                                        (or the same inside {"guardrail": {...}}); params and info are merged
//	DELETE /guardrails/{id}                 {"message": "Guardrail <id> deleted successfully"}
//	POST   /guardrails/apply_guardrail      {"guardrail_name", "text"} → {"response_text"}   (also /apply_guardrail)
//
// A row is {"guardrail_id", "guardrail_name", "litellm_params", "guardrail_info", "status",
// "created_at", "updated_at", "guardrail_definition_location": "db"|"config"}. Config-file
// guardrails are listed with id "config:<name>" and cannot be edited or deleted here.
//
// Every write compiles the resulting litellm_params first (guardrail.Compile): a bad config is
// a 400 "Guardrail configuration error: ..." and nothing is written, so the serving version
// stays. After the commit the row is applied to this replica's registry (read-your-writes);
// the other replicas get it through the change feed, or a read-through on a miss.
//
// Management errors use LiteLLM's HTTPException envelope {"detail": {"error": msg}};
// apply_guardrail answers like LiteLLM's handle_exception_on_proxy, the OpenAI envelope
// {"error": {"message", "type", "param", "code"}}.
func (s *Server) guardrailRoutes() {
	e := s.e
	s.detailRoute(http.MethodPost, "/guardrails", "guardrails", s.guardrailCreate)
	s.detailRoute(http.MethodGet, "/guardrails/list", "guardrails", s.guardrailList)
	s.detailRoute(http.MethodGet, "/v2/guardrails/list", "guardrails", s.guardrailList)
	s.detailRoute(http.MethodGet, "/guardrails/:id", "guardrails", s.guardrailGet)
	s.detailRoute(http.MethodGet, "/guardrails/:id/info", "guardrails", s.guardrailGet)
	s.detailRoute(http.MethodPut, "/guardrails/:id", "guardrails", s.guardrailPut)
	s.detailRoute(http.MethodPatch, "/guardrails/:id", "guardrails", s.guardrailPatch)
	s.detailRoute(http.MethodDelete, "/guardrails/:id", "guardrails", s.guardrailDelete)
	e.POST("/guardrails/apply_guardrail", s.applyGuardrail, s.auth(anyKey))
	e.POST("/apply_guardrail", s.applyGuardrail, s.auth(anyKey))
}

// statusActive is the only gateway.guardrails.status that is ever served.
const statusActive = mgmt.StatusActive

// guardrailRowJSON is a gateway.guardrails row (row_to_json).
type guardrailRowJSON = mgmt.GuardrailRow

// guardrailOut is a guardrail as the management routes answer it: LiteLLM's
// GuardrailInfoResponse plus status.
type guardrailOut struct {
	guardrailRowJSON
	Location string `json:"guardrail_definition_location"` // "db" | "config"
}

func parseGuardrailRow(r mgmt.Row) (guardrailRowJSON, error) { return mgmt.ParseGuardrailRow(r) }

func maskGuardrailParams(params json.RawMessage) json.RawMessage {
	if isNull(params) {
		return params
	}
	return provider.MaskParamsExcept(params, mgmt.PlainGuardrailParams...)
}

func dbGuardrailOut(g guardrailRowJSON) guardrailOut {
	info := g.Info
	if isNull(info) {
		info = json.RawMessage("{}")
	}
	g.Info = info
	g.Params = maskGuardrailParams(g.Params)
	return guardrailOut{guardrailRowJSON: g, Location: "db"}
}

func configGuardrailOut(e *registry.Entry[*guardrail.Guardrail]) guardrailOut {
	params := json.RawMessage(e.Value.Params)
	if len(params) == 0 {
		params, _ = json.Marshal(map[string]any{"guardrail": guardrail.GuardrailType, "mode": e.Value.Modes, "default_on": e.Value.DefaultOn})
	}
	return guardrailOut{Location: "config", guardrailRowJSON: guardrailRowJSON{
		ID: e.ID, Name: e.Value.Name, Params: maskGuardrailParams(params), Info: json.RawMessage("{}"), Status: statusActive}}
}

// guardrailSpec is the guardrail object of a write. Pointers and raw JSON tell "absent"
// from "empty".
type guardrailSpec struct {
	Name   *string         `json:"guardrail_name"`
	Params json.RawMessage `json:"litellm_params"`
	Info   json.RawMessage `json:"guardrail_info"`
	Status *string         `json:"status"`
}

// guardrailPatchSpec is PATCH's guardrail object: a guardrailSpec plus default_on, PATCH's
// shortcut for litellm_params.default_on (LiteLLM PatchGuardrailRequest).
type guardrailPatchSpec struct {
	guardrailSpec
	DefaultOn *bool `json:"default_on"`
}

// jsonKindOf returns the first non-space byte of a JSON value ('{', '[', '"', ...), 0 if empty.
func jsonKindOf(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// guardrailWrite is what a validated write stores.
type guardrailWrite = mgmt.GuardrailWrite

// guardrailRowOK answers with a written row (applied by the write path).
func guardrailRowOK(c echo.Context, row mgmt.Row) error {
	g, err := parseGuardrailRow(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, dbGuardrailOut(g))
}

// guardrailRequest is the body of POST and PUT (LiteLLM CreateGuardrailRequest).
type guardrailRequest struct {
	Guardrail *guardrailSpec `json:"guardrail"`
}

func specOf(req guardrailRequest) (*guardrailSpec, error) {
	if req.Guardrail == nil {
		return nil, detailErr(http.StatusBadRequest, `guardrail is required: {"guardrail": {"guardrail_name": ..., "litellm_params": {...}}}`)
	}
	return req.Guardrail, nil
}

func infoOrEmpty(b json.RawMessage) []byte {
	if isNull(b) {
		return []byte("{}")
	}
	return b
}

func statusOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// guardrailCreate: POST /guardrails.
func (s *Server) guardrailCreate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeGuardrail, "guardrails"); err != nil {
		return err
	}
	w, err := decodeGuardrailWrite(c)
	if err != nil {
		return err
	}
	row, err := s.mgmt.CreateGuardrail(c.Request().Context(), w)
	if err != nil {
		return err
	}
	return guardrailRowOK(c, row)
}

// guardrailList: GET /guardrails/list — database guardrails (every status, oldest first),
// then config-file guardrails by name.
func (s *Server) guardrailList(c echo.Context) error {
	out := []guardrailOut{}
	if s.mgmt.Stored(mgmt.TypeGuardrail) {
		rows, err := s.mgmt.GuardrailRows(c.Request().Context())
		if err != nil {
			return err
		}
		for _, r := range rows {
			g, err := parseGuardrailRow(r)
			if err != nil {
				return err
			}
			out = append(out, dbGuardrailOut(g))
		}
	}
	var cfg []*registry.Entry[*guardrail.Guardrail]
	s.Guardrails.Load().All(func(e *registry.Entry[*guardrail.Guardrail]) bool {
		if e.Config {
			cfg = append(cfg, e)
		}
		return true
	})
	sort.Slice(cfg, func(i, j int) bool { return cfg[i].Value.Name < cfg[j].Value.Name })
	for _, e := range cfg {
		out = append(out, configGuardrailOut(e))
	}
	return c.JSON(http.StatusOK, map[string]any{"guardrails": out})
}

// guardrailGet: GET /guardrails/{id} and /guardrails/{id}/info.
func (s *Server) guardrailGet(c echo.Context) error {
	id := c.Param("id")
	if e, ok := s.mgmt.ConfigGuardrail(id); ok {
		return c.JSON(http.StatusOK, configGuardrailOut(e))
	}
	if !s.mgmt.Stored(mgmt.TypeGuardrail) {
		return mgmt.GuardrailNotFound(id)
	}
	row, err := s.mgmt.GuardrailRow(c.Request().Context(), id)
	if err != nil {
		return err
	}
	g, err := parseGuardrailRow(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, dbGuardrailOut(g))
}

// guardrailPut: PUT /guardrails/{id} — replaces name, litellm_params and guardrail_info
// (absent info becomes {}); the status changes only when given. A litellm_params secret sent
// back masked keeps the stored one (admin.ReplaceGuardrail).
func (s *Server) guardrailPut(c echo.Context) error {
	id := c.Param("id")
	if err := s.mgmt.EditableGuardrail(id); err != nil {
		return err
	}
	if err := s.requireDB(mgmt.TypeGuardrail, "guardrails"); err != nil {
		return err
	}
	w, err := decodeGuardrailWrite(c)
	if err != nil {
		return err
	}
	row, err := s.mgmt.ReplaceGuardrail(c.Request().Context(), id, w)
	if err != nil {
		return err
	}
	return guardrailRowOK(c, row)
}

// guardrailPatch: PATCH /guardrails/{id} — merges the given litellm_params and guardrail_info
// keys over the stored ones, and sets guardrail_name, status and default_on when given. The
// read-modify-write runs in one transaction holding the table's write lock, so concurrent
// patches never lose each other's keys.
func (s *Server) guardrailPatch(c echo.Context) error {
	id := c.Param("id")
	if err := s.mgmt.EditableGuardrail(id); err != nil {
		return err
	}
	if err := s.requireDB(mgmt.TypeGuardrail, "guardrails"); err != nil {
		return err
	}
	var req struct {
		guardrailPatchSpec
		Guardrail *guardrailPatchSpec `json:"guardrail"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	patch := req.guardrailPatchSpec
	if req.Guardrail != nil {
		patch = *req.Guardrail
	}
	row, err := s.mgmt.PatchGuardrail(c.Request().Context(), id, mgmt.GuardrailPatch{
		Name: patch.Name, Params: patch.Params, Info: patch.Info, Status: patch.Status, DefaultOn: patch.DefaultOn})
	if err != nil {
		return err
	}
	return guardrailRowOK(c, row)
}

// guardrailDelete: DELETE /guardrails/{id}.
func (s *Server) guardrailDelete(c echo.Context) error {
	id := c.Param("id")
	if err := s.mgmt.DeletableGuardrail(id); err != nil {
		return err
	}
	if err := s.requireDB(mgmt.TypeGuardrail, "guardrails"); err != nil {
		return err
	}
	if err := s.mgmt.DeleteGuardrail(c.Request().Context(), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"message": "Guardrail " + id + " deleted successfully"})
}

// applyGuardrail: POST /guardrails/apply_guardrail (and /apply_guardrail) — runs one active
// guardrail over text whatever its modes, as LiteLLM does: 200 {"response_text"} (masked where
// MASK matched); a BLOCK match is a 400 with the block message; an unknown or inactive name is
// a 404 after a read-through.
func (s *Server) applyGuardrail(c echo.Context) error {
	var req struct {
		Name *string `json:"guardrail_name"`
		Text *string `json:"text"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if req.Name == nil || *req.Name == "" {
		return badRequest("guardrail_name is required")
	}
	if req.Text == nil {
		return badRequest("text is required")
	}
	g, err := s.pipe.Guardrail(c.Request().Context(), *req.Name)
	if err != nil {
		return err
	}
	out, err := g.Check(*req.Text)
	if err != nil {
		return blockedErr(err)
	}
	return c.JSON(http.StatusOK, map[string]string{"response_text": out})
}

// decodeGuardrailWrite reads a full guardrail (POST, PUT) from the body; the name is required.
func decodeGuardrailWrite(c echo.Context) (guardrailWrite, error) {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return guardrailWrite{}, err
	}
	var req guardrailRequest
	// a flat body ({"guardrail_name", ...}) is told about the wrapper, not its unknown fields
	if gjson.GetBytes(raw, "guardrail").Exists() {
		if err := unmarshalStrict(c, raw, &req); err != nil {
			return guardrailWrite{}, err
		}
	}
	spec, err := specOf(req)
	if err != nil {
		return guardrailWrite{}, err
	}
	if spec.Name == nil {
		return guardrailWrite{}, detailErr(http.StatusBadRequest, "guardrail_name is required and cannot be empty")
	}
	return guardrailWrite{Name: *spec.Name, Params: spec.Params, Info: infoOrEmpty(spec.Info), Status: statusOf(spec.Status)}, nil
}

// blockedErr is a content filter's block as a 400 with its message.
func blockedErr(err error) error {
	var be *guardrail.BlockedError
	if errors.As(err, &be) {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: be.Message}
	}
	return err
}
