package api

import (
	"errors"
	"strings"

	pipeline "lockstep/pkg/call"
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
// translate, a *format.RequestError; unknown model, key access, budgets, rate limits, guardrails, "No
// deployments available", a RouterRateLimitError in LiteLLM, which is no litellm exception)
// keep the texts API.md gives.
func liteLLMMessage(err error, ue *format.UpstreamError) string {
	if strings.HasPrefix(ue.Message, "litellm.") {
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

// routerMessage is liteLLMMessage for a call that failed in the router (a
// *pipeline.FallbackError: every retry spent, its fallbacks tried or none applying), with the
// texts LiteLLM's router appends to such a failure (litellm/router.py
// async_function_with_fallbacks_common_utils):
//
//	<message><note>. Received Model Group=<group>
//	Available Model Group Fallbacks=<['b', 'c'] or None>
//	Error doing the fallback: <the last fallback's message>
//
// the last line only when a fallback was called and failed (its message as it would be
// answered, without texts of its own: a fallback's fallbacks are not followed), or when
// LiteLLM raised the failure again in its fallback handling (no entry for the group in the
// list of the error's class: the line repeats <message><note>). The note is LiteLLM's
// context-window / content-policy hint or its "No fallback model group found for original
// model_group=<group>. Fallbacks=<fallbacks>" (pipeline.FallbackError.Note). Any other
// failure: liteLLMMessage.
func routerMessage(err error, ue *format.UpstreamError) string {
	msg := liteLLMMessage(err, ue)
	var fe *pipeline.FallbackError
	if !errors.As(err, &fe) {
		return msg
	}
	base := msg + fe.Note
	out := base + ". Received Model Group=" + fe.Group + "\nAvailable Model Group Fallbacks=" + fe.Available
	switch {
	case fe.Again:
		out += "\nError doing the fallback: " + base
	case fe.Last != nil:
		out += "\nError doing the fallback: " + failureText(fe.Last)
	}
	return out
}

// failureText is a failed call's message as its own answer would carry it.
func failureText(err error) string {
	var ue *format.UpstreamError
	if errors.As(err, &ue) {
		return liteLLMMessage(err, ue)
	}
	return err.Error()
}
