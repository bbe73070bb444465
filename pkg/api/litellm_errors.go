package api

import (
	"strings"

	"lockstep/pkg/format"
	"lockstep/pkg/router"
)

// liteLLMMessage is an upstream failure's message as LiteLLM's proxy answers it: the upstream's
// text behind the prefix of the LiteLLM exception class its exception mapping raises
// (litellm/exceptions.py, whose constructors set message = "litellm.<Class>: " + message;
// litellm/litellm_core_utils/exception_mapping_utils.py picks the class). err is the failed
// call's error (a *router.Error or the *format.UpstreamError itself), ue its upstream error.
// The classes, by router.Classify and the status:
//
//	context window (code context_length_exceeded, "maximum context length", …)
//	                     litellm.ContextWindowExceededError: litellm.BadRequestError: <m>
//	content policy       litellm.BadRequestError: litellm.ContentPolicyViolationError: <m>
//	400, 413, 422        litellm.BadRequestError: <m>
//	401                  litellm.AuthenticationError: <m>
//	403                  litellm.PermissionDeniedError: <m>
//	404                  litellm.NotFoundError: <m>
//	408, 504, timeouts   litellm.Timeout: <m>
//	429                  litellm.RateLimitError: <m>
//	500, 529             litellm.InternalServerError: <m>
//	502                  litellm.BadGatewayError: <m>
//	503                  litellm.ServiceUnavailableError: <m>
//	no HTTP answer       litellm.APIConnectionError: <m>
//	any other status     litellm.APIError: <m>
//
// (the two subclasses keep both prefixes in LiteLLM's order: ContextWindowExceededError
// prefixes after BadRequestError's constructor ran, ContentPolicyViolationError before it). A
// message that already names a LiteLLM class — the mock_response errors and the request hooks
// (mock_testing_rate_limit_error, …), worded as LiteLLM's own mocks — is kept as it is.
// Only upstream failures get a prefix: the gateway's own refusals (a request it cannot read or
// translate, ue.Local; unknown model, key access, budgets, rate limits, guardrails, "No
// deployments available", a RouterRateLimitError in LiteLLM, which is no litellm exception)
// keep the texts API.md gives.
func liteLLMMessage(err error, ue *format.UpstreamError) string {
	if ue.Local || strings.HasPrefix(ue.Message, "litellm.") {
		return ue.Message
	}
	return liteLLMPrefix(router.Classify(err), ue) + ue.Message
}

// liteLLMPrefix is the class prefix liteLLMMessage puts before an upstream error of class c.
func liteLLMPrefix(c router.Class, ue *format.UpstreamError) string {
	switch c {
	case router.ClassContextWindow:
		return "litellm.ContextWindowExceededError: litellm.BadRequestError: "
	case router.ClassContentPolicy:
		return "litellm.BadRequestError: litellm.ContentPolicyViolationError: "
	case router.ClassBadRequest:
		if ue.Status < 500 {
			return "litellm.BadRequestError: "
		}
	case router.ClassAuthentication:
		return "litellm.AuthenticationError: "
	case router.ClassPermissionDenied:
		return "litellm.PermissionDeniedError: "
	case router.ClassNotFound:
		return "litellm.NotFoundError: "
	case router.ClassTimeout:
		return "litellm.Timeout: "
	case router.ClassRateLimit:
		return "litellm.RateLimitError: "
	}
	switch {
	case ue.Conn:
		return "litellm.APIConnectionError: "
	case ue.Status == 500 || ue.Status == 529:
		return "litellm.InternalServerError: "
	case ue.Status == 502:
		return "litellm.BadGatewayError: "
	case ue.Status == 503:
		return "litellm.ServiceUnavailableError: "
	case ue.Status == 408 || ue.Status == 504:
		return "litellm.Timeout: "
	}
	return "litellm.APIError: "
}
