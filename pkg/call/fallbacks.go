package call

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/provider"
	"lockstep/pkg/router"
)

// Fallbacks (API.md "Router"; LiteLLM router.py async_function_with_fallbacks): when a call
// fails in the router (every retry spent: an upstream failure or no deployment available, a
// *router.Error), the fallback model groups for its class (router.Settings.FallbackGroups:
// context_window_fallbacks, content_policy_fallbacks, the request's fallbacks, else
// router_settings.fallbacks and default_fallbacks) are tried in order, each as a whole new
// run of the call pipeline: model access for the fallback group, limits and budgets, guardrails,
// routing, spend, exactly as a request naming that group would run. So a fallback is never a
// way around a guardrail or a budget: a refusal on a fallback's path (401 access, 429 limit,
// 400 budget, a guardrail BLOCK) is the answer. When every fallback fails in its router too,
// the first failure is answered (LiteLLM raises the original exception). A fallback group
// that does not exist is skipped. A streamed call falls back only before its first byte was
// sent (once the stream has started its failures end it, as without fallbacks). The answer,
// a success or the failure, carries x-litellm-attempted-fallbacks: how many fallback groups
// were called (0 without). A failure in the router is returned as a *FallbackError (with
// LiteLLM's "Received Model Group=" texts), whether fallbacks were tried or not.
// A fallback's own fallbacks are not followed. A group none of whose deployments is in the
// end user's allowed_model_region (preCallMiss) falls back the same way.
//
// Serve runs sp (its members scanned into rf, which it may overwrite) through the pipeline
// with the hooks (hooks.go) and fallbacks: answer is called with each started call and
// writes its answer (Do or Stream, then the response); its error, when the call failed in
// the router, starts the next fallback. Serve returns nil once an answer succeeded; else the
// error to answer and the call whose LiteLLM headers the error answer carries (SetHeaders
// with a nil Response, unless the answer has started), nil when a step refused the call.
func (p *Pipeline) Serve(ctx context.Context, sp Spec, rf *Fields, answer func(ctx context.Context, c *Call) error) (*Call, error) {
	var hk hooks
	if rf.anyHook || len(sp.ReqHeader[timeoutHeader]) > 0 {
		var err error
		if hk, sp.Body, err = p.readHooks(ctx, sp, rf); err != nil {
			return nil, err
		}
		if hk.timeout > 0 {
			ctx = provider.WithCallTimeout(ctx, hk.timeout)
		}
	}
	rs := sp.Caller.RouterSettings()
	if rs != nil {
		if rs.Timeout > 0 && hk.timeout == 0 { // the request's x-litellm-timeout wins (LiteLLM)
			ctx = provider.WithCallTimeout(ctx, rs.Timeout)
		}
		if rs.HasNumRetries {
			ctx = router.WithNumRetries(ctx, rs.NumRetries)
		}
	}
	// the first failure, with LiteLLM's texts for it (fallback_error.go); made on the first
	// failure only, so a call that succeeds allocates none
	var fe *FallbackError
	var answerCall *Call // whose headers the error answer carries: the first call, else the last
	var groups []string
	called := 0 // fallback runs started (x-litellm-attempted-fallbacks)
	for tried := 0; ; {
		cctx, call, err := p.Start(ctx, sp, rf)
		if err != nil && !preCallMiss(err) {
			return nil, err // a refusal stands, also on a fallback's path
		}
		if call != nil {
			call.fallbacks = called
			call.timeout = hk.timeoutHdr
			if rs != nil {
				call.routerHeaders(rs)
			}
			call.mock = hk.mock(sp.Model, called)
			if err = answer(cctx, call); err == nil {
				return nil, nil
			}
		}
		class, ok := routerClass(err)
		if !ok {
			return call, err
		}
		if fe == nil {
			var plan FallbackError
			groups, plan = fallbackPlan(rs.Apply(p.Router.Settings()), sp.Model, class, hk.fallbacks)
			plan.Err, answerCall = err, call
			fe = &plan
		} else {
			fe.Last = err
			if answerCall == nil {
				answerCall = call
			}
		}
		for {
			if tried >= len(groups) {
				// LiteLLM sets x-litellm-attempted-fallbacks on a failure too (also when no call
				// was admitted: a region miss, whose answer carries no other call header)
				if answerCall != nil {
					answerCall.fallbacks = called
				} else if sp.Header != nil {
					sp.Header["X-Litellm-Attempted-Fallbacks"] = smallInt(called)
				}
				return answerCall, fe
			}
			next := groups[tried]
			tried++
			agent := strings.HasPrefix(next, AgentModelPrefix)
			if _, err := p.Router.Group(ctx, next); !agent && errors.Is(err, router.ErrUnknownModel) {
				continue
			}
			body, err := sjson.SetBytes(sp.Body, "model", next)
			if err != nil {
				return answerCall, fe
			}
			// the fallback is called as a request naming it would be
			sp.Model, sp.Body, sp.resolve, sp.guardrails = next, body, nil, nil
			if agent {
				if err := p.AgentModel(ctx, &sp); err != nil {
					continue // an unknown agent: skipped like an unknown group
				}
			}
			*rf = Scan(body)
			called++
			break
		}
	}
}

// routerClass is the class of a call that failed in the router (a *router.Error, or a
// pre-call check that left no deployment: preCallMiss, a rate-limit class as LiteLLM's
// RouterRateLimitError); ok false for any other failure (a refusal, a guardrail block, a
// client gone).
func routerClass(err error) (router.Class, bool) {
	var re *router.Error
	if !errors.As(err, &re) {
		if preCallMiss(err) {
			return router.ClassRateLimit, true
		}
		return router.ClassOther, false
	}
	return re.Class, true
}

// preCallMiss reports whether err is the "No deployments available" of a pre-call check (an
// end user's allowed_model_region matching no deployment of the group). LiteLLM raises it
// inside the router's async_function_with_fallbacks (router._pre_call_checks →
// RouterRateLimitError), so it starts the group's fallbacks like a failed call; nothing was
// admitted for it.
func preCallMiss(err error) bool {
	var nd *router.NoDeploymentsError
	return errors.As(err, &nd) && nd.PreCallChecks
}

// requestFallbacks reads a request's "fallbacks" (LiteLLM: a list of model group names, or
// of {"model": "<name>"} objects) — nil when absent or null — and checks that the caller may
// use each one, before any call is made, as LiteLLM's auth does (user_api_key_auth: every
// fallback model goes through can_key_call_model): a model the key (or its team) may not
// call is refused with the same *AccessDenied (401) as asking for it directly.
func (p *Pipeline) requestFallbacks(ctx context.Context, who Caller, r gjson.Result) ([]string, error) {
	if !r.Exists() || r.Type == gjson.Null {
		return nil, nil
	}
	if !r.IsArray() {
		return nil, invalid("fallbacks", "fallbacks: must be a list of model names, got %s", r.Raw)
	}
	var out []string
	for i, v := range r.Array() {
		name := v.Str
		switch {
		case v.Type == gjson.String:
		case v.IsObject():
			var bad string
			v.ForEach(func(k, _ gjson.Result) bool {
				if k.Str != "model" {
					bad = k.Str
					return false
				}
				return true
			})
			if bad != "" {
				return nil, invalid("fallbacks", "fallbacks[%d].%s: not supported (a fallback is a model name or {\"model\": \"<name>\"})", i, bad)
			}
			m := v.Get("model")
			if m.Type != gjson.String {
				return nil, invalid("fallbacks", "fallbacks[%d].model: must be a model name, got %s", i, orNone(m.Raw))
			}
			name = m.Str
		default:
			return nil, invalid("fallbacks", "fallbacks[%d]: must be a model name or {\"model\": \"<name>\"}, got %s", i, v.Raw)
		}
		if name == "" {
			return nil, invalid("fallbacks", "fallbacks[%d]: the model name is empty", i)
		}
		out = append(out, name)
	}
	if who.Key != nil {
		for _, m := range out {
			group, err := p.Router.Group(ctx, m)
			if err != nil && !errors.Is(err, router.ErrUnknownModel) {
				return nil, err
			}
			if _, err := p.checkAccess(ctx, who, m, target{group: group}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// pyRepr renders fallbacks as Python prints them (LiteLLM's messages format the lists with
// str()): ['a', 'b'] and [{'a': ['b']}].
func pyRepr(request []string, l router.FallbackList) string {
	if request != nil {
		return pyList(request)
	}
	if l == nil {
		return "None"
	}
	out := "["
	for i, e := range l {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("{'%s': %s}", e.Group, pyList(e.Fallbacks))
	}
	return out + "]"
}
