// Package call is the call pipeline's domain side, without HTTP (no echo): the limits and
// budget admission step (Governance, the Admitter the gateway installs) and the typed
// errors its refusals are (RateLimited, BudgetExceeded, Unavailable), which pkg/api's one
// error table maps to a status and an envelope (and A2A's JSON-RPC codes).
package call

import (
	"context"
	"lockstep/pkg/format"
	"net/http"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/router"
)

// Admitter is the limits step of the call pipeline: cluster-wide rate limits, parallel
// request limits and budgets (API.md "Keys (admin) and their limits"). With no Admitter
// every call is admitted.
//
// Admit runs after model access and before any guardrail or upstream work. It returns a
// Ticket for an admitted call, or an error refusing it: a *RateLimited, *BudgetExceeded or
// *Unavailable (pkg/api answers them 429 rate_limit_error, 400 budget_exceeded, 503
// service_unavailable on the LLM routes, and as a JSON-RPC error on A2A); any other error is
// answered as the API answers it elsewhere. It may set response headers in CallInfo.Header
// (x-ratelimit-*, Retry-After). A nil Ticket with a nil error admits the call without
// wanting its outcome.
type Admitter interface {
	Admit(ctx context.Context, c CallInfo) (Ticket, error)
}

// Ticket is one admitted call. Done is called exactly once, when the call has ended (answer
// sent, stream ended, failed or cancelled): release what Admit took (a parallel-request slot)
// and record usage and spend.
type Ticket interface {
	Done(Outcome)
}

// CallInfo is what the limits step knows of a call before it starts.
type CallInfo struct {
	// Key is the caller's virtual key; nil for the master key (and with no master key).
	Key *keys.Key
	// Route is "chat", "responses", "messages", "embeddings" or "a2a".
	Route string
	// Model is the model group asked for (for A2A: the agent's model).
	Model string
	// Stream is true for a streamed call.
	Stream bool
	// Header is the response header (nil when the route cannot send headers, e.g. an A2A
	// stream already started): the step may set x-ratelimit-* here.
	Header http.Header
	// Team, User and Organization are the key's team, internal user and organization (the
	// team's, else the user's); nil when it has none. Their budgets and limits apply too.
	Team         *accounts.Team
	User         *accounts.User
	Organization *accounts.Organization
	// Project is the key's project (nil: none): its budget and limits apply too, and its
	// spend is tracked (owner "project").
	Project *accounts.Project
	// EndUserID is the end user (LiteLLM's customer id; "" when absent): the
	// x-litellm-customer-id or x-litellm-end-user-id header, else the body's "user",
	// litellm_metadata.user, metadata.user_id or safety_identifier (endUserID). EndUser is its
	// gateway.end_users row (nil when none exists: its spend is still tracked).
	EndUserID string
	EndUser   *accounts.EndUser
	// CallID is the call's id (x-litellm-call-id; the spend log's request_id).
	CallID string
	// Tags are the request's metadata.tags (the spend log's request_tags; nil: none).
	Tags []string
}

// Outcome is how an admitted call ended.
type Outcome struct {
	// Deployment is the deployment that answered (for an agent with its own upstream, its
	// ad-hoc deployment with empty model_info); nil when no upstream was reached.
	Deployment *router.Deployment
	// Usage is the token usage the upstream reported (zero when it reported none).
	Usage format.Usage
	// Err is why the call failed; nil on success.
	Err error
	// ResponseID is the answer's "id" the client saw ("" when none): the spend log's
	// request_id as LiteLLM logs it (store.SpendLog.ResponseID).
	ResponseID string
	// Images is the number of images an image generation answered (0 otherwise), priced at
	// the deployment's output_cost_per_image each (spend.ImageCost).
	Images int
}
