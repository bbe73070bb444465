package call

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/accounts"
	"lockstep/pkg/format"
	"lockstep/pkg/keys"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// The pipeline with no Postgres: mock deployments (mock_response) in config registries, the
// real router and client, and a fake limits step recording what it admitted and how each
// call ended.

// fakeAdmitter is the limits step: it refuses with refuse (when set), else admits and records.
type fakeAdmitter struct {
	mu       sync.Mutex
	refuse   error
	admitted []CallInfo
	outcomes []Outcome
}

func (a *fakeAdmitter) Admit(_ context.Context, ci CallInfo) (Ticket, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse != nil {
		return nil, a.refuse
	}
	a.admitted = append(a.admitted, ci)
	return a, nil
}

func (a *fakeAdmitter) Done(o Outcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outcomes = append(a.outcomes, o)
}

func (a *fakeAdmitter) ended() []Outcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Outcome(nil), a.outcomes...)
}

// testDeps: each group name → its deployments' litellm_params (model_id "<group>-<i>").
func testPipeline(t *testing.T, s router.Settings, groups map[string][]string) (*Pipeline, *fakeAdmitter) {
	t.Helper()
	models := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	cfg := map[string]*router.Deployment{}
	for g, params := range groups {
		for i, p := range params {
			id := g + "-" + string(rune('0'+i))
			d, err := router.Build(id, g, []byte(p), nil)
			require.NoError(t, err, id)
			cfg[id] = d
		}
	}
	models.SetConfig(cfg)
	lim := &fakeAdmitter{}
	p := &Pipeline{
		Router:   router.New(models, provider.NewClient(), s),
		Client:   provider.NewClient(),
		Keys:     registry.New(registry.Options[*keys.Key]{Type: store.Key}),
		EndUsers: registry.New(registry.Options[*accounts.EndUser]{Type: store.EndUser}),
		Limits:   lim,
		IDs:      NewIDs("r1"),
	}
	return p, lim
}

const mockOK = `{"model":"openai/m","mock_response":"ok"}`

func chatBody(model string, extra string) []byte {
	return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]` + extra + `}`)
}

// serve runs body through Serve and answers with Do; it returns the calls started, the
// response of the last, and Serve's error.
func serve(t *testing.T, p *Pipeline, who Caller, body []byte, h http.Header) ([]*Call, *provider.Response, error) {
	t.Helper()
	rf := Scan(body)
	model := rf.Model.Str
	var calls []*Call
	var res *provider.Response
	_, err := p.Serve(context.Background(), Spec{Format: format.FormatChat, Route: "chat", Caller: who, Model: model, Body: body,
		Header: http.Header{}, ReqHeader: h}, &rf, func(ctx context.Context, c *Call) error {
		calls = append(calls, c)
		var err error
		res, err = c.Do(ctx)
		return err
	})
	return calls, res, err
}

func TestServeDoAdmitsCallsAndEnds(t *testing.T) {
	t.Parallel()
	p, lim := testPipeline(t, router.Settings{}, map[string][]string{"a": {mockOK}})
	calls, res, err := serve(t, p, Caller{Admin: true}, chatBody("a", ""), nil)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, 200, max(res.Status, 200))
	require.Contains(t, string(res.Body), `"ok"`)
	require.Equal(t, 1, calls[0].attempts)
	require.Equal(t, "a-0", calls[0].d.ModelID)
	out := lim.ended()
	require.Len(t, out, 1)
	require.NoError(t, out[0].Err)
	require.Equal(t, "a-0", out[0].Deployment.ModelID)
	require.Equal(t, "a", lim.admitted[0].Model)
	require.NotEmpty(t, lim.admitted[0].CallID)
}

func TestStartStreamEndsOnClose(t *testing.T) {
	t.Parallel()
	p, lim := testPipeline(t, router.Settings{}, map[string][]string{"a": {mockOK}})
	body := []byte(`{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	ctx, c, err := p.Start(context.Background(), Spec{Format: format.FormatChat, Route: "chat", Caller: Caller{Admin: true}, Model: "a", Body: body, Stream: true, Header: http.Header{}}, nil)
	require.NoError(t, err)
	st, err := c.Stream(ctx)
	require.NoError(t, err)
	var text string
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		text += ev.Text
	}
	require.NoError(t, st.Close())
	require.Equal(t, "ok", text)
	out := lim.ended()
	require.Len(t, out, 1)
	require.NoError(t, out[0].Err)
}

func TestStartRefusals(t *testing.T) {
	t.Parallel()
	p, lim := testPipeline(t, router.Settings{}, map[string][]string{"a": {mockOK}})
	start := func(who Caller, model string, body []byte, h http.Header) error {
		_, _, err := p.Start(context.Background(), Spec{Format: format.FormatChat, Route: "chat", Caller: who, Model: model, Body: body, Header: http.Header{}, ReqHeader: h}, nil)
		return err
	}
	var um *UnknownModel
	require.ErrorAs(t, start(Caller{Admin: true}, "nope", chatBody("nope", ""), nil), &um)
	require.Equal(t, "nope", um.Model)

	// a key whose models do not name the group: re-checked, then denied
	k := &keys.Key{Token: "t1", Models: []string{"other"}}
	var ad *AccessDenied
	require.ErrorAs(t, start(Caller{Key: k}, "a", chatBody("a", ""), nil), &ad)
	require.Equal(t, "key", ad.Scope)
	// aliases map the name before access
	ka := &keys.Key{Token: "t2", Models: []string{"a"}, Extra: &keys.Extra{Aliases: map[string]string{"alias": "a"}}}
	require.NoError(t, start(Caller{Key: ka}, "alias", chatBody("alias", ""), nil))

	var mp *MissingParam
	ke := &keys.Key{Token: "t3", Extra: &keys.Extra{EnforcedParams: []string{"user", "metadata.generation_name"}}}
	require.ErrorAs(t, start(Caller{Key: ke}, "a", chatBody("a", ""), nil), &mp)
	require.Equal(t, "user", mp.Name)
	require.ErrorAs(t, start(Caller{Key: ke}, "a", chatBody("a", `,"user":"u","metadata":{}`), nil), &mp)
	require.Equal(t, "[metadata][generation_name]", mp.Name)
	require.NoError(t, start(Caller{Key: ke}, "a", chatBody("a", `,"user":"u","metadata":{"generation_name":"g"}`), nil))

	var cc *CacheControlRefused
	kc := &keys.Key{Token: "t4", Extra: &keys.Extra{AllowedCacheControls: []string{"ttl"}}}
	require.ErrorAs(t, start(Caller{Key: kc}, "a", chatBody("a", `,"cache":{"ttl":1,"no-cache":true}`), nil), &cc)
	require.Equal(t, "no-cache", cc.Control)
	require.NoError(t, start(Caller{Key: kc}, "a", chatBody("a", `,"cache":{"ttl":1}`), nil))

	// the end user: blocked ones are refused; a region without deployments is a pre-call miss
	p.EndUsers.SetConfig(map[string]*accounts.EndUser{
		"blocked": {ID: "blocked", Blocked: true},
		"eu-user": {ID: "eu-user", AllowedModelRegion: "eu"},
	})
	var eb *EndUserBlocked
	require.ErrorAs(t, start(Caller{Admin: true}, "a", chatBody("a", `,"user":"blocked"`), nil), &eb)
	require.ErrorAs(t, start(Caller{Admin: true}, "a", chatBody("a", ""), http.Header{"X-Litellm-Customer-Id": {"blocked"}}), &eb)
	err := start(Caller{Admin: true}, "a", chatBody("a", `,"user":"eu-user"`), nil)
	require.True(t, preCallMiss(err), "%v", err)
	require.NoError(t, start(Caller{Admin: true}, "a", chatBody("a", `,"user":"unknown-end-user"`), nil))

	// the limits step's refusal is the answer, nothing is admitted
	n := len(lim.admitted)
	lim.refuse = &RateLimited{Subject: "key"}
	var rl *RateLimited
	require.ErrorAs(t, start(Caller{Admin: true}, "a", chatBody("a", ""), nil), &rl)
	require.Len(t, lim.admitted, n)
}

// Fallbacks: a routed failure (a mock hook's 500) runs the fallback groups in order, each a
// whole pipeline run; unknown groups are skipped; a refusal is not fallen back from.
func TestServeFallbacks(t *testing.T) {
	t.Parallel()
	s := router.Settings{Fallbacks: router.FallbackList{{Group: "a", Fallbacks: []string{"gone", "b"}}}}
	p, lim := testPipeline(t, s, map[string][]string{"a": {mockOK}, "b": {mockOK}})
	calls, res, err := serve(t, p, Caller{Admin: true}, chatBody("a", `,"mock_testing_fallbacks":true`), nil)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	require.Equal(t, 0, calls[0].fallbacks)
	require.Equal(t, 1, calls[1].fallbacks)
	require.Equal(t, "b-0", calls[1].d.ModelID)
	require.Contains(t, string(res.Body), `"ok"`)
	out := lim.ended()
	require.Len(t, out, 2)
	var re *router.Error
	require.ErrorAs(t, out[0].Err, &re, "the mocked failure is recorded")
	require.Equal(t, router.ClassInternalServer, re.Class)
	require.Equal(t, "litellm.InternalServerError: This is a mock exception for model=a, to trigger a fallback. Fallbacks=[{'a': ['gone', 'b']}]", re.Err.(*format.UpstreamError).Message)

	// the request's fallbacks replace the settings'; {"model": …} objects are names too
	calls, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"mock_testing_fallbacks":true,"fallbacks":[{"model":"b"}]`), nil)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	require.Equal(t, "b", calls[1].target.group[0].Value.ModelName)

	// every call rate limited: the first failure is the answer, with its call
	calls, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"mock_testing_rate_limit_error":true`), nil)
	require.ErrorAs(t, err, &re)
	require.Equal(t, router.ClassRateLimit, re.Class)
	require.Len(t, calls, 2, "a and b both rate limited")

	// a group without fallbacks: the failure stands
	calls, _, err = serve(t, p, Caller{Admin: true}, chatBody("b", `,"mock_testing_fallbacks":true`), nil)
	require.ErrorAs(t, err, &re)
	require.Len(t, calls, 1)

	// a pre-call miss (the end user's region) falls back like a failed call
	p.EndUsers.SetConfig(map[string]*accounts.EndUser{"eu-user": {ID: "eu-user", AllowedModelRegion: "eu"}})
	_, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"user":"eu-user"`), nil)
	var nd *router.NoDeploymentsError
	require.ErrorAs(t, err, &nd)
	require.True(t, nd.PreCallChecks)

	// a refusal (a guardrail the request names does not exist) is the answer
	_, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"guardrails":["nope"]`), nil)
	var ug *UnknownGuardrail
	require.ErrorAs(t, err, &ug)
}

// The hooks' members are validated (an *Invalid naming each) and removed from the body.
func TestServeHooksValidation(t *testing.T) {
	t.Parallel()
	p, _ := testPipeline(t, router.Settings{}, map[string][]string{"a": {mockOK}, "b": {mockOK}})
	for extra, want := range map[string]string{
		`,"mock_testing_fallbacks":"yes"`:                    `mock_testing_fallbacks: must be a boolean, got "yes"`,
		`,"mock_testing_rate_limit_error":1`:                 `mock_testing_rate_limit_error: must be a boolean, got 1`,
		`,"mock_timeout":"x"`:                                `mock_timeout: must be a boolean, got "x"`,
		`,"mock_timeout":true,"timeout":"5"`:                 `timeout: must be a number of seconds > 0, got "5"`,
		`,"mock_timeout":true,"timeout":-1`:                  `timeout: must be a number of seconds > 0, got -1`,
		`,"fallbacks":"b"`:                                   `fallbacks: must be a list of model names, got "b"`,
		`,"fallbacks":[{"model":"b","x":1}]`:                 `fallbacks[0].x: not supported (a fallback is a model name or {"model": "<name>"})`,
		`,"fallbacks":[{"model":1}]`:                         `fallbacks[0].model: must be a model name, got 1`,
		`,"fallbacks":[{}]`:                                  `fallbacks[0].model: must be a model name, got nothing`,
		`,"fallbacks":[3]`:                                   `fallbacks[0]: must be a model name or {"model": "<name>"}, got 3`,
		`,"fallbacks":[""]`:                                  `fallbacks[0]: the model name is empty`,
		`,"mock_testing_fallbacks":null,"fallbacks":["b",1]`: `fallbacks[1]: must be a model name or {"model": "<name>"}, got 1`,
	} {
		_, _, err := serve(t, p, Caller{Admin: true}, chatBody("a", extra), nil)
		var in *Invalid
		require.ErrorAs(t, err, &in, extra)
		require.Equal(t, want, in.Error(), extra)
	}
	_, _, err := serve(t, p, Caller{Admin: true}, chatBody("a", ""), http.Header{timeoutHeader: {"abc"}})
	var in *Invalid
	require.ErrorAs(t, err, &in)
	require.Equal(t, `x-litellm-timeout: must be a number of seconds > 0, got "abc"`, in.Error())

	// a valid header is answered back; the hook members do not reach the upstream
	calls, _, err := serve(t, p, Caller{Admin: true}, chatBody("a", `,"mock_testing_fallbacks":false,"fallbacks":["b"]`), http.Header{timeoutHeader: {"2.5"}})
	require.NoError(t, err)
	require.Equal(t, []string{"2.5"}, calls[0].timeout)
	require.NotContains(t, string(calls[0].body), "fallbacks")

	// a key may name only fallbacks it may call
	k := &keys.Key{Token: "t", Models: []string{"a"}}
	_, _, err = serve(t, p, Caller{Key: k}, chatBody("a", `,"fallbacks":["b"]`), nil)
	var ad *AccessDenied
	require.ErrorAs(t, err, &ad)
	require.Equal(t, "b", ad.Model)
}

// mock_timeout waits the request's timeout and fails as LiteLLM's mock timeout.
func TestServeMockTimeout(t *testing.T) {
	t.Parallel()
	p, _ := testPipeline(t, router.Settings{}, map[string][]string{"a": {mockOK}})
	_, _, err := serve(t, p, Caller{Admin: true}, chatBody("a", `,"mock_timeout":true,"timeout":0.001`), nil)
	var re *router.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, router.ClassTimeout, re.Class)
	require.Equal(t, "litellm.Timeout: This is a mock timeout error", re.Err.(*format.UpstreamError).Message)
	_, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"mock_timeout":true`), http.Header{timeoutHeader: {"0.001"}})
	require.ErrorAs(t, err, &re)
	require.Equal(t, router.ClassTimeout, re.Class)
}

func TestPositiveSecondsAndPyRepr(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "0", "-1", "NaN", "Inf", "1e300", "x"} {
		_, err := positiveSeconds(bad)
		require.Error(t, err, bad)
	}
	d, err := positiveSeconds(" 1.5 ")
	require.NoError(t, err)
	require.Equal(t, "1.5s", d.String())
	require.Equal(t, "None", pyRepr(nil, nil))
	require.Equal(t, "['x', 'y']", pyRepr([]string{"x", "y"}, router.FallbackList{{Group: "a", Fallbacks: []string{"b"}}}))
	require.Equal(t, "[{'a': ['b']}, {'*': ['c']}]", pyRepr(nil, router.FallbackList{{Group: "a", Fallbacks: []string{"b"}}, {Group: "*", Fallbacks: []string{"c"}}}))
}

// Guardrails named by the request run in their modes: pre_call masks the body sent, a
// during_call block wins over the call's answer, a post_call block refuses the answer; each
// call ends once for the limits step.
func TestServeGuardrailModes(t *testing.T) {
	t.Parallel()
	p, lim := testPipeline(t, router.Settings{}, map[string][]string{"a": {mockOK}})
	p.Guardrails = testGuardrails(t, map[string]string{
		"mask":   `{"guardrail": "litellm_content_filter", "mode": "pre_call", "blocked_words": [{"keyword": "secret", "action": "MASK"}]}`,
		"during": `{"guardrail": "litellm_content_filter", "mode": "during_call", "blocked_words": [{"keyword": "hi", "action": "BLOCK"}]}`,
		"post":   `{"guardrail": "litellm_content_filter", "mode": "post_call", "blocked_words": [{"keyword": "ok", "action": "BLOCK"}]}`,
	})
	body := []byte(`{"model":"a","guardrails":["mask"],"messages":[{"role":"user","content":"my secret"}]}`)
	calls, _, err := serve(t, p, Caller{Admin: true}, body, nil)
	require.NoError(t, err)
	require.NotContains(t, string(calls[0].body), "secret")

	var gb *Blocked
	_, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"guardrails":["during"]`), nil)
	require.ErrorAs(t, err, &gb)
	require.True(t, gb.Input)
	_, _, err = serve(t, p, Caller{Admin: true}, chatBody("a", `,"guardrails":["post"]`), nil)
	require.ErrorAs(t, err, &gb)
	require.False(t, gb.Input)
	out := lim.ended()
	require.Len(t, out, 3)
	require.ErrorAs(t, out[1].Err, &gb)
	require.ErrorAs(t, out[2].Err, &gb)
}
