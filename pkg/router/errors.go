package router

import (
	"context"
	"errors"
	"fmt"
	"lockstep/pkg/format"
	"strings"
	"time"
)

// Class is the kind of a failed call, as LiteLLM's exception classes name them
// (litellm/exceptions.py). It decides retries (retry_policy), cooldowns
// (allowed_fails_policy) and, for a caller, which fallbacks apply (context_window_fallbacks,
// content_policy_fallbacks, fallbacks).
type Class int

// Classes. ContextWindow and ContentPolicy are BadRequest's subclasses in LiteLLM: a policy
// entry for them wins, else the BadRequest entry applies.
const (
	ClassOther            Class = iota // not an upstream failure (e.g. a cancelled context)
	ClassBadRequest                    // 400, 422
	ClassContextWindow                 // ContextWindowExceededError
	ClassContentPolicy                 // ContentPolicyViolationError
	ClassAuthentication                // 401
	ClassPermissionDenied              // 403
	ClassNotFound                      // 404
	ClassTimeout                       // 408, 504 and transport timeouts
	ClassRateLimit                     // 429 (also lockstep's own "No deployments available")
	ClassInternalServer                // other 5xx, transport failures
)

var classNames = [...]string{"other", "bad_request", "context_window_exceeded", "content_policy_violation",
	"authentication", "permission_denied", "not_found", "timeout", "rate_limit", "internal_server"}

func (c Class) String() string { return classNames[c] }

// policyClasses are the classes retry_policy and allowed_fails_policy name.
var policyClasses = []Class{ClassBadRequest, ClassAuthentication, ClassTimeout, ClassRateLimit, ClassContentPolicy, ClassInternalServer}

// policyName is the class' prefix in LiteLLM's RetryPolicy / AllowedFailsPolicy field names.
func (c Class) policyName() string {
	switch c {
	case ClassBadRequest:
		return "BadRequestError"
	case ClassAuthentication:
		return "AuthenticationError"
	case ClassTimeout:
		return "TimeoutError"
	case ClassRateLimit:
		return "RateLimitError"
	case ClassContentPolicy:
		return "ContentPolicyViolationError"
	case ClassInternalServer:
		return "InternalServerError"
	}
	return ""
}

// parent is the class whose policy entry applies when c has none (LiteLLM's subclassing).
func (c Class) parent() Class {
	if c == ClassContextWindow || c == ClassContentPolicy {
		return ClassBadRequest
	}
	return c
}

// Classify returns the class of an error from Router.Do/Stream or provider.Client: by the
// upstream's error code first (OpenAI's context_length_exceeded, content_policy_violation,
// content_filter), then by its status, and for a 400 by the message texts LiteLLM's
// exception_mapping_utils recognises per provider (OpenAI "maximum context length", Anthropic
// "prompt is too long", Azure "content management policy", …). The texts are the upstream's
// data, matched as LiteLLM matches them; a Go error's text is never parsed.
func Classify(err error) Class {
	var re *Error
	if errors.As(err, &re) {
		return re.Class
	}
	var nd *NoDeploymentsError
	if errors.As(err, &nd) {
		return ClassRateLimit
	}
	var ue *format.UpstreamError
	if !errors.As(err, &ue) {
		var re *format.RequestError
		if errors.As(err, &re) { // refused before any call: a 400 without a code
			return classify400(re.Message)
		}
		return ClassOther
	}
	switch ue.Code {
	case "context_length_exceeded", "string_above_max_length":
		return ClassContextWindow
	case "content_policy_violation", "content_filter":
		return ClassContentPolicy
	}
	switch s := ue.Status; {
	case s == 400 || s == 413 || s == 422:
		return classify400(ue.Message)
	case s == 401:
		return ClassAuthentication
	case s == 403:
		return ClassPermissionDenied
	case s == 404:
		return ClassNotFound
	case s == 408 || s == 504:
		return ClassTimeout
	case s == 429:
		return ClassRateLimit
	case s >= 500:
		return ClassInternalServer
	}
	return ClassBadRequest
}

// classify400 is the class of a 400 (413, 422) with message msg and no recognised code: by the
// texts LiteLLM's exception mapping reads, else ClassBadRequest.
func classify400(msg string) Class {
	msg = strings.ToLower(msg)
	for _, t := range contextWindowTexts {
		if strings.Contains(msg, t) {
			return ClassContextWindow
		}
	}
	for _, t := range contentPolicyTexts {
		if strings.Contains(msg, t) {
			return ClassContentPolicy
		}
	}
	return ClassBadRequest
}

// The message texts LiteLLM's exception mapping reads as a context-window or content-policy
// error (litellm/litellm_core_utils/exception_mapping_utils.py), lower-cased.
var (
	contextWindowTexts = []string{"maximum context length", "context_length_exceeded", "context length",
		"prompt is too long", "input is too long", "too many tokens", "exceeds the maximum number of tokens",
		"model's maximum context", "reduce the length of the messages"}
	contentPolicyTexts = []string{"content_policy_violation", "content policy", "content management policy",
		"safety system", "responsibleaipolicyviolation", "content_filter"}
)

// Error is a routed call that failed: Class says which kind (for a caller's fallback loop:
// ClassContextWindow → context_window_fallbacks, ClassContentPolicy →
// content_policy_fallbacks, others → fallbacks), Err is the last attempt's error
// (*format.UpstreamError, or *NoDeploymentsError), Attempts how many upstream calls were
// made (x-litellm-attempted-retries is Attempts-1 when > 0).
type Error struct {
	Class      Class
	Deployment string // model_id of the last attempt; "" when none was called
	Attempts   int
	Err        error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// NoDeploymentsError: every deployment of the group is cooling down or at its rpm, tpm or
// max_parallel_requests cap. HTTP 429 with LiteLLM's text (router.py, RouterRateLimitError):
//
//	No deployments available for selected model, Try again in <n> seconds. Passed model=<m>. pre-call-checks=False, cooldown_list=['<id>', …]
type NoDeploymentsError struct {
	Model        string
	RetryAfter   time.Duration
	CooldownList []string // model_ids cooling down
	Capped       []string // model_ids at a cap ("<id>: rpm" …), for logs
	// PreCallChecks: a pre-call check (an end user's allowed_model_region, InRegion) left no
	// deployment; printed as LiteLLM's "pre-call-checks=True".
	PreCallChecks bool
}

func (e *NoDeploymentsError) Error() string {
	ids := make([]string, len(e.CooldownList))
	for i, id := range e.CooldownList {
		ids[i] = "'" + id + "'"
	}
	secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
	pc := "False"
	if e.PreCallChecks {
		pc = "True"
	}
	return fmt.Sprintf("No deployments available for selected model, Try again in %d seconds. Passed model=%s. pre-call-checks=%s, cooldown_list=[%s]",
		max(secs, 1), e.Model, pc, strings.Join(ids, ", "))
}

// wrap classifies a failed attempt's error for the caller.
func wrap(err error, d *Deployment, attempts int) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	id := ""
	if d != nil {
		id = d.ModelID
	}
	return &Error{Class: Classify(err), Deployment: id, Attempts: attempts, Err: err}
}
