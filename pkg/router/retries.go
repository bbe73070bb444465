package router

import (
	"context"
	"errors"
	"io"
	"lockstep/pkg/format"
	"time"

	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
)

// Retries (LiteLLM Router num_retries and retry_policy): a failed attempt is retried, on
// another deployment of the group when one is left (else the same one), while the attempts
// after the first stay within the retries its class allows: retry_policy's entry for the class
// (context-window and content-policy errors fall back to BadRequestErrorRetries), else
// num_retries for a retryable failure (408, 409, 429, 5xx, transport failures, timeouts), else
// none. Every cooldown-eligible failure counts towards the deployment's cooldown (cooldowns.go).

// Do sends a non-streaming request for the model group through a deployment, retrying as
// above. Errors: *Error (its Class for the caller's fallbacks; it unwraps to the last
// *format.UpstreamError or a *NoDeploymentsError, HTTP 429), or ctx's error.
func (r *Router) Do(ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, body []byte) (*provider.Response, *Deployment, error) {
	res, d, _, err := r.DoN(ctx, group, in, body, provider.Headers{})
	return res, d, err
}

// DoWith is Do with the call's headers (provider.Client.DoWith: the client headers forwarded
// upstream and the answer's header the call writes to).
func (r *Router) DoWith(ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, body []byte, h provider.Headers) (*provider.Response, *Deployment, error) {
	res, d, _, err := r.DoN(ctx, group, in, body, h)
	return res, d, err
}

// DoN is DoWith that also returns how many upstream calls were made (1 + retries; for
// x-litellm-attempted-retries), also on success.
func (r *Router) DoN(ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, body []byte, h provider.Headers) (*provider.Response, *Deployment, int, error) {
	return attempt(r, ctx, group, in, false, func(p *picked) (*provider.Response, error) {
		start := time.Now()
		res, err := r.client.DoWith(ctx, p.d.Deployment, in, body, h)
		if err != nil {
			p.release(0)
			return nil, err
		}
		if r.settings.RoutingStrategy == LatencyBased {
			el := time.Since(start).Seconds()
			if out := res.Usage.CompletionTokens; out > 0 {
				el /= float64(out)
			}
			p.st.lat[0].record(el, time.Now().UnixNano(), r.settings.LatencyTTL, r.settings.LatencySamples)
		}
		p.release(res.Usage.PromptTokens + res.Usage.CompletionTokens)
		return res, nil
	})
}

// Stream opens a streaming request, retrying like Do until an upstream accepted it. The
// returned Stream holds the deployment (in-flight count, caps) until Close, which settles the
// tokens its usage frames reported.
func (r *Router) Stream(ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, body []byte) (provider.Stream, *Deployment, error) {
	st, d, _, err := r.StreamN(ctx, group, in, body, provider.Headers{})
	return st, d, err
}

// StreamWith is Stream with the call's headers (see DoWith).
func (r *Router) StreamWith(ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, body []byte, h provider.Headers) (provider.Stream, *Deployment, error) {
	st, d, _, err := r.StreamN(ctx, group, in, body, h)
	return st, d, err
}

// StreamN is StreamWith that also returns how many upstream calls were made (see DoN).
func (r *Router) StreamN(ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, body []byte, h provider.Headers) (provider.Stream, *Deployment, int, error) {
	return attempt(r, ctx, group, in, true, func(p *picked) (provider.Stream, error) {
		start := time.Now()
		st, err := r.client.StreamWith(ctx, p.d.Deployment, in, body, h)
		if err != nil {
			p.release(0)
			return nil, err
		}
		if r.settings.RoutingStrategy == LatencyBased {
			p.st.lat[1].record(time.Since(start).Seconds(), time.Now().UnixNano(), r.settings.LatencyTTL, r.settings.LatencySamples)
		}
		return &routedStream{Stream: st, p: *p}, nil
	})
}

// retriesFor is how many retries a failure of class c allows: retry_policy's, else the
// caller's num_retries (WithNumRetries) or router_settings.num_retries for a retryable one.
func (r *Router) retriesFor(ctx context.Context, c Class, err error) int {
	if n, ok := r.settings.RetryPolicy[c]; ok {
		return n
	}
	if n, ok := r.settings.RetryPolicy[c.parent()]; ok {
		return n
	}
	if provider.IsRetryable(err) {
		if n, ok := numRetriesOf(ctx); ok {
			return n
		}
		return r.settings.NumRetries
	}
	return 0
}

// attempt runs call on picked deployments until one succeeds or the failure's class allows
// no more retries. call releases p when it fails. The int is the number of calls made.
func attempt[T any](r *Router, ctx context.Context, group []*registry.Entry[*Deployment], in format.Format, stream bool, call func(*picked) (T, error)) (T, *Deployment, int, error) {
	var zero T
	var tried []string
	var lastErr error
	var last *Deployment
	for n := 0; ; n++ {
		p, err := r.pick(ctx, group, tried, in, stream)
		if err != nil {
			var nd *NoDeploymentsError
			if lastErr != nil && errors.As(err, &nd) {
				return zero, last, n, wrap(lastErr, last, n) // nothing left to retry on: the failure stands
			}
			var ue *format.UpstreamError
			if errors.As(err, &ue) { // the group cannot serve this format
				return zero, group[0].Value, n, err
			}
			return zero, last, n, wrap(err, nil, n)
		}
		res, err := call(&p)
		if err == nil {
			return res, p.d, n + 1, nil
		}
		lastErr, last = err, p.d
		if ctx.Err() != nil {
			return zero, p.d, n + 1, err
		}
		c := Classify(err)
		if c == ClassTimeout && r.settings.RoutingStrategy == LatencyBased {
			// LiteLLM lowest_latency: a timeout counts as a very slow sample
			k := 0
			if stream {
				k = 1
			}
			p.st.lat[k].record(1000, time.Now().UnixNano(), r.settings.LatencyTTL, r.settings.LatencySamples)
		}
		r.fail(p.d, p.st, len(group), c, err)
		if n >= r.retriesFor(ctx, c, err) {
			return zero, p.d, n + 1, wrap(err, p.d, n+1)
		}
		tried = append(tried, p.d.ModelID)
	}
}

// routedStream is a stream that holds its deployment until Close, which settles the tokens
// its upstream reported (provider.StreamUsage, also for a client that did not ask for them).
type routedStream struct {
	provider.Stream
	p      picked
	closed bool
}

var _ provider.UsageReporter = (*routedStream)(nil)

// StreamUsage is the wrapped stream's (the pipeline charges it).
func (s *routedStream) StreamUsage() (format.Usage, bool) { return provider.StreamUsage(s.Stream) }

func (s *routedStream) Next() (provider.Event, error) {
	ev, err := s.Stream.Next()
	if err != nil && err != io.EOF {
		s.end()
	}
	return ev, err
}

func (s *routedStream) Close() error {
	s.end()
	return s.Stream.Close()
}

func (s *routedStream) end() {
	if s.closed {
		return
	}
	s.closed = true
	u, _ := provider.StreamUsage(s.Stream)
	s.p.release(u.PromptTokens + u.CompletionTokens)
}
