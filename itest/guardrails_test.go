package itest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// Guardrail management API, apply_guardrail and enforcement on the LLM routes, across two
// replica processes sharing one database (API.md "Guardrails").

func guardrailNotFoundMsg(name string) string {
	return "Guardrail '" + name + "' not found. Please ensure the guardrail is configured in your LiteLLM proxy."
}

// contentFilter builds litellm_params of a litellm_content_filter guardrail.
func contentFilter(mode any, extra map[string]any) map[string]any {
	p := map[string]any{"guardrail": "litellm_content_filter", "mode": mode}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func word(keyword, action string) map[string]any {
	return map[string]any{"keyword": keyword, "action": action}
}

func prebuilt(name, action string) map[string]any {
	return map[string]any{"pattern_type": "prebuilt", "pattern_name": name, "action": action}
}

// createGuardrail creates a guardrail through g and returns its row.
func createGuardrail(t *testing.T, g *Gateway, name string, params map[string]any) map[string]any {
	t.Helper()
	st, b := g.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{
		"guardrail_name": name, "litellm_params": params, "guardrail_info": map[string]any{"owner": "itest"}}})
	require.Equal(t, 200, st, "%s", b)
	row := JSON(t, b)
	require.NotEmpty(t, row["guardrail_id"])
	return row
}

// apply calls /guardrails/apply_guardrail and returns the status, the response_text (200) or
// the error message (otherwise).
func apply(t *testing.T, g *Gateway, name, text string) (int, string) {
	t.Helper()
	st, b := g.Do(t, "POST", "/guardrails/apply_guardrail", map[string]any{"guardrail_name": name, "text": text})
	if st == 200 {
		return st, JSON(t, b)["response_text"].(string)
	}
	return st, errorMessage(t, b)
}

// errorMessage extracts the message of an OpenAI {"error": {"message"}} or a LiteLLM
// {"detail": {"error"}} envelope.
func errorMessage(t *testing.T, b []byte) string {
	t.Helper()
	m := JSON(t, b)
	if e, ok := m["error"].(map[string]any); ok {
		return e["message"].(string)
	}
	if d, ok := m["detail"].(map[string]any); ok {
		return d["error"].(string)
	}
	t.Fatalf("no error message in %s", b)
	return ""
}

// queryInt runs a one-value query straight on the database.
func queryInt(t *testing.T, dbURL, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n))
	return n
}

func listGuardrails(t *testing.T, g *Gateway) []map[string]any {
	t.Helper()
	st, b := g.Do(t, "GET", "/guardrails/list", nil)
	require.Equal(t, 200, st, "%s", b)
	var out struct {
		Guardrails []map[string]any `json:"guardrails"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	return out.Guardrails
}

// addModel points model group m at the fake upstream.
func addModel(t *testing.T, g *Gateway, up *fakeupstream.Server) {
	t.Helper()
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": "m", "litellm_params": map[string]any{
		"model": "openai/gpt-x", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
	require.Equal(t, 200, st, "%s", b)
}

// upstreamUserText is the last user message the fake upstream received on chat completions.
func upstreamUserText(t *testing.T, up *fakeupstream.Server) string {
	t.Helper()
	r, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok, "the upstream received no chat call")
	var body struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &body), "%s", r.Body)
	require.NotEmpty(t, body.Messages)
	return body.Messages[len(body.Messages)-1].Content
}

// upstreamUserTexts is the last user text of every chat call the upstream received.
func upstreamUserTexts(t *testing.T, up *fakeupstream.Server) []string {
	t.Helper()
	var out []string
	for _, r := range up.Requests() {
		if r.Path != "/v1/chat/completions" {
			continue
		}
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(r.Body, &body) == nil && len(body.Messages) > 0 {
			out = append(out, body.Messages[len(body.Messages)-1].Content)
		}
	}
	return out
}

// sse splits a chat completions SSE body into the streamed text, the error message of an
// error event ("" if none) and whether it ended with [DONE].
func sse(t *testing.T, b []byte) (text, errMsg string, done bool) {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var f struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &f), "frame %s", data)
		if f.Error != nil {
			errMsg = f.Error.Message
		}
		for _, c := range f.Choices {
			sb.WriteString(c.Delta.Content)
		}
	}
	return sb.String(), errMsg, done
}

func TestGuardrailCreatedOnAAppliedOnB(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	row := createGuardrail(t, p.A, "pii-filter", contentFilter("pre_call", map[string]any{
		"blocked_words": []any{word("project-zeus", "BLOCK"), word("internal", "MASK")},
		"patterns":      []any{prebuilt("email", "MASK"), prebuilt("us_ssn", "BLOCK")},
	}))
	id := row["guardrail_id"].(string)
	require.Equal(t, "pii-filter", row["guardrail_name"])
	require.Equal(t, "active", row["status"])
	require.Equal(t, map[string]any{"owner": "itest"}, row["guardrail_info"])
	require.Equal(t, "litellm_content_filter", row["litellm_params"].(map[string]any)["guardrail"])
	require.NotEmpty(t, row["created_at"])
	require.NotEmpty(t, row["updated_at"])

	// Immediately on B: no wait between the write on A and these calls.
	st, out := apply(t, p.B, "pii-filter", "mail bob@example.com about the internal memo")
	require.Equal(t, 200, st, out)
	require.Equal(t, "mail [EMAIL_REDACTED] about the [KEYWORD_REDACTED] memo", out)
	st, out = apply(t, p.B, "pii-filter", "nothing to see")
	require.Equal(t, 200, st)
	require.Equal(t, "nothing to see", out)
	st, out = apply(t, p.B, "pii-filter", "status of Project-Zeus?")
	require.Equal(t, 400, st)
	require.Equal(t, "Content blocked: keyword 'project-zeus' detected", out)
	st, out = apply(t, p.B, "pii-filter", "ssn 123-45-6789")
	require.Equal(t, 400, st)
	require.Equal(t, "Content blocked: us_ssn pattern detected", out)
	for _, g := range []*Gateway{p.A, p.B} {
		st, out = apply(t, g, "no-such-guardrail", "hi")
		require.Equal(t, 404, st)
		require.Equal(t, guardrailNotFoundMsg("no-such-guardrail"), out)
	}
	// The same through the /apply_guardrail alias.
	st, b := p.B.Do(t, "POST", "/apply_guardrail", map[string]any{"guardrail_name": "pii-filter", "text": "internal"})
	require.Equal(t, 200, st, "%s", b)
	require.JSONEq(t, `{"response_text": "[KEYWORD_REDACTED]"}`, string(b))

	// Reads on B.
	for _, path := range []string{"/guardrails/" + id, "/guardrails/" + id + "/info"} {
		st, b := p.B.Do(t, "GET", path, nil)
		require.Equal(t, 200, st, "%s", b)
		got := JSON(t, b)
		require.Equal(t, id, got["guardrail_id"])
		require.Equal(t, "db", got["guardrail_definition_location"])
		require.Equal(t, row["litellm_params"], got["litellm_params"])
	}
	list := listGuardrails(t, p.B)
	require.Len(t, list, 1)
	require.Equal(t, id, list[0]["guardrail_id"])
	require.Equal(t, "active", list[0]["status"])

	// apply is open to virtual keys; management is admin only.
	st, b = p.A.Do(t, "POST", "/key/generate", map[string]any{})
	require.Equal(t, 200, st, "%s", b)
	key := JSON(t, b)["key"].(string)
	st, b = p.B.DoKey(t, key, "POST", "/guardrails/apply_guardrail", map[string]any{"guardrail_name": "pii-filter", "text": "internal"})
	require.Equal(t, 200, st, "%s", b)
	st, _ = p.B.DoKey(t, key, "GET", "/guardrails/list", nil)
	require.Equal(t, 403, st)
	st, _ = p.B.DoKey(t, key, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "x", "litellm_params": contentFilter("pre_call", nil)}})
	require.Equal(t, 403, st)
}

func TestGuardrailPendingReviewNeverServes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	params := `{"guardrail": "litellm_content_filter", "mode": "pre_call", "blocked_words": [{"keyword": "forbidden", "action": "BLOCK"}]}`
	PSQL(t, p.DB, `INSERT INTO gateway.guardrails (guardrail_id, guardrail_name, litellm_params, status)
		VALUES ('gr-review', 'reviewed', $1::jsonb, 'pending_review')`, params)

	for _, g := range []*Gateway{p.A, p.B} {
		before := g.ReadThrough(t, "guardrails")
		st, out := apply(t, g, "reviewed", "forbidden words")
		require.Equal(t, 404, st, out)
		require.Equal(t, guardrailNotFoundMsg("reviewed"), out)
		after := g.ReadThrough(t, "guardrails")
		// The miss went to the database (or its negative cache) and still found nothing.
		require.Equal(t, before["found"], after["found"], "replica %s", g.ReplicaID)
		require.Greater(t, after["not_found"]+after["negative_hits"], before["not_found"]+before["negative_hits"], "replica %s", g.ReplicaID)
		// A second miss is still a 404 (negative cache or another read-through).
		st, out = apply(t, g, "reviewed", "forbidden words")
		require.Equal(t, 404, st, out)
	}
	// Listed for review, with its status.
	list := listGuardrails(t, p.B)
	require.Len(t, list, 1)
	require.Equal(t, "pending_review", list[0]["status"])

	// Approval straight in the database makes it usable on both replicas.
	PSQL(t, p.DB, `UPDATE gateway.guardrails SET status = 'active' WHERE guardrail_id = 'gr-review'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, "approved guardrail serves on "+g.ReplicaID, func() bool {
			st, _ := apply(t, g, "reviewed", "forbidden words")
			return st == 400
		})
		st, out := apply(t, g, "reviewed", "forbidden words")
		require.Equal(t, 400, st)
		require.Equal(t, "Content blocked: keyword 'forbidden' detected", out)
	}

	// Rejecting it takes it away everywhere again.
	PSQL(t, p.DB, `UPDATE gateway.guardrails SET status = 'rejected' WHERE guardrail_id = 'gr-review'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, "rejected guardrail gone on "+g.ReplicaID, func() bool {
			st, _ := apply(t, g, "reviewed", "forbidden words")
			return st == 404
		})
	}
}

func TestGuardrailChatPreCallMaskReachesUpstream(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	createGuardrail(t, p.A, "mask-pii", contentFilter("pre_call", map[string]any{
		"patterns":      []any{prebuilt("email", "MASK")},
		"blocked_words": []any{word("codename", "MASK"), word("drop table", "BLOCK")},
	}))

	// Named at the top level, called on B right after the write on A.
	st, b := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "guardrails": []string{"mask-pii"},
		"messages": []any{map[string]any{"role": "user", "content": "write to alice@example.org about codename falcon"}}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "write to [EMAIL_REDACTED] about [KEYWORD_REDACTED] falcon", upstreamUserText(t, up))
	r, _ := up.LastRequest("/v1/chat/completions")
	require.NotContains(t, string(r.Body), "guardrails", "the guardrail names are not forwarded upstream")
	require.NotContains(t, string(r.Body), "alice@example.org")

	// Named in metadata.guardrails, content as text parts.
	st, b = p.A.Do(t, "POST", "/chat/completions", map[string]any{"model": "m", "metadata": map[string]any{"guardrails": []string{"mask-pii"}},
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "ping bob@example.com"}}}}})
	require.Equal(t, 200, st, "%s", b)
	r, _ = up.LastRequest("/v1/chat/completions")
	require.Contains(t, string(r.Body), "ping [EMAIL_REDACTED]")
	require.NotContains(t, string(r.Body), "bob@example.com")

	// A pre_call BLOCK never reaches the upstream.
	n := len(up.Requests())
	st, b = p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "guardrails": []string{"mask-pii"},
		"messages": []any{map[string]any{"role": "user", "content": "please DROP TABLE users"}}})
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "Content blocked: keyword 'drop table' detected", errorMessage(t, b))
	require.Len(t, up.Requests(), n)

	// Naming an unknown guardrail is a 404 with the exact text.
	st, b = p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "guardrails": []string{"nope"},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	require.Equal(t, 404, st, "%s", b)
	require.Equal(t, guardrailNotFoundMsg("nope"), errorMessage(t, b))

	// The Anthropic messages route masks too (translated to chat for this OpenAI upstream),
	// and answers a block in Anthropic's error envelope.
	st, b = p.B.Do(t, "POST", "/v1/messages", map[string]any{"model": "m", "max_tokens": 64, "guardrails": []string{"mask-pii"},
		"messages": []any{map[string]any{"role": "user", "content": "mail dave@example.com"}}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "mail [EMAIL_REDACTED]", upstreamUserText(t, up))
	st, b = p.B.Do(t, "POST", "/v1/messages", map[string]any{"model": "m", "max_tokens": 64, "guardrails": []string{"mask-pii"},
		"messages": []any{map[string]any{"role": "user", "content": "drop table x"}}})
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "error", JSON(t, b)["type"], "%s", b)
	require.Equal(t, "Content blocked: keyword 'drop table' detected", errorMessage(t, b))

	// during_call runs on the input alongside the call; a block is a 400, streamed or not
	// (a stream holds its first byte until the check is done).
	createGuardrail(t, p.A, "during-block", contentFilter("during_call", map[string]any{"blocked_words": []any{word("abort-now", "BLOCK")}}))
	for _, stream := range []bool{false, true} {
		st, b = p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "stream": stream, "guardrails": []string{"during-block"},
			"messages": []any{map[string]any{"role": "user", "content": "please abort-now"}}})
		require.Equal(t, 400, st, "stream=%v: %s", stream, b)
		require.Equal(t, "Content blocked: keyword 'abort-now' detected", errorMessage(t, b))
		st, b = p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "stream": stream, "guardrails": []string{"during-block"},
			"messages": []any{map[string]any{"role": "user", "content": "carry on"}}})
		require.Equal(t, 200, st, "stream=%v: %s", stream, b)
		// the blocked call above was sent upstream in parallel and cancelled: the fake may
		// record it after this one, so look for this call's text among all requests
		require.Contains(t, upstreamUserTexts(t, up), "carry on", "during_call never rewrites the input")
	}

	// Without naming it, the text goes through untouched.
	st, b = p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m",
		"messages": []any{map[string]any{"role": "user", "content": "codename falcon"}}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "codename falcon", upstreamUserText(t, up))

	// A default_on guardrail applies to calls that do not name it: at once on the writer,
	// on the other replica once the change feed delivered it.
	createGuardrail(t, p.A, "always", contentFilter("pre_call", map[string]any{"default_on": true,
		"blocked_words": []any{word("zebra", "MASK")}}))
	st, b = p.A.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m",
		"messages": []any{map[string]any{"role": "user", "content": "a zebra crossing"}}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "a [KEYWORD_REDACTED] crossing", upstreamUserText(t, up))
	Eventually(t, "default_on guardrail active on B", func() bool {
		st, _ := p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m",
			"messages": []any{map[string]any{"role": "user", "content": "a zebra crossing"}}})
		return st == 200 && upstreamUserText(t, up) == "a [KEYWORD_REDACTED] crossing"
	})
}

func TestGuardrailPostCallOnOutput(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStreamChunks(12), fakeupstream.WithReply(func(in fakeupstream.ReplyInput) string {
		if strings.Contains(in.Text, "secret") {
			return "Sure. The launch code is alpha-bravo-charlie and the rest of this answer must never arrive"
		}
		return "Contact carol@example.net for details"
	}))
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	createGuardrail(t, p.A, "out-block", contentFilter("post_call", map[string]any{
		"blocked_words": []any{word("alpha-bravo-charlie", "BLOCK")}}))
	createGuardrail(t, p.A, "out-mask", contentFilter([]string{"post_call"}, map[string]any{
		"patterns": []any{prebuilt("email", "MASK")}}))
	chat := func(g *Gateway, text string, stream bool, guardrails ...string) (int, []byte) {
		return g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "stream": stream, "guardrails": guardrails,
			"messages": []any{map[string]any{"role": "user", "content": text}}})
	}

	// Streamed: the BLOCK stops the stream with an error event before the keyword is out.
	st, b := chat(p.B, "tell me the secret", true, "out-block")
	require.Equal(t, 200, st, "%s", b)
	text, errMsg, done := sse(t, b)
	require.Equal(t, "Content blocked: keyword 'alpha-bravo-charlie' detected", errMsg, "%s", b)
	require.False(t, done, "a blocked stream does not end with [DONE]: %s", b)
	require.NotContains(t, text, "alpha-bravo-charlie")
	require.NotContains(t, text, "never arrive")
	require.True(t, strings.HasPrefix("Sure. The launch code is alpha-bravo-charlie", text), "sent only a prefix of the answer: %q", text)

	// Not streamed: a 400 with the same text.
	st, b = chat(p.A, "tell me the secret", false, "out-block")
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "Content blocked: keyword 'alpha-bravo-charlie' detected", errorMessage(t, b))

	// An answer without the keyword streams through whole.
	st, b = chat(p.B, "hello", true, "out-block")
	require.Equal(t, 200, st, "%s", b)
	text, errMsg, done = sse(t, b)
	require.Empty(t, errMsg)
	require.True(t, done)
	require.Equal(t, "Contact carol@example.net for details", text)

	// post_call MASK on a non-streamed answer.
	st, b = chat(p.A, "hello", false, "out-mask")
	require.Equal(t, 200, st, "%s", b)
	var res struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "Contact [EMAIL_REDACTED] for details", res.Choices[0].Message.Content)
}

func TestGuardrailStreamPostCallMask(t *testing.T) {
	t.Parallel()
	// One text chunk: a MASK match inside a chunk is masked in the stream.
	up := fakeupstream.Start(t, fakeupstream.WithStreamChunks(1), fakeupstream.WithReply(func(fakeupstream.ReplyInput) string {
		return "Contact carol@example.net for details"
	}))
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	createGuardrail(t, p.A, "out-mask", contentFilter("post_call", map[string]any{"patterns": []any{prebuilt("email", "MASK")}}))
	for _, g := range []*Gateway{p.A, p.B} {
		st, b := g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "stream": true, "guardrails": []string{"out-mask"},
			"messages": []any{map[string]any{"role": "user", "content": "who?"}}})
		require.Equal(t, 200, st, "%s", b)
		text, errMsg, done := sse(t, b)
		require.Empty(t, errMsg)
		require.True(t, done)
		require.Equal(t, "Contact [EMAIL_REDACTED] for details", text)
		require.NotContains(t, string(b), "carol@example.net")
	}
}

func TestGuardrailBadInputsStoreNothing(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	bad := []struct {
		name string
		body any
		msg  string // exact message, or prefix when it ends with "..."
	}{
		{"invalid regex", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-re", "litellm_params": contentFilter("pre_call", map[string]any{
			"patterns": []any{map[string]any{"pattern_type": "regex", "pattern": "(unclosed", "action": "BLOCK"}}})}},
			`Guardrail configuration error: patterns[0].pattern: invalid regex "(unclosed": missing closing )`},
		{"bad action", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-action", "litellm_params": contentFilter("pre_call", map[string]any{
			"blocked_words": []any{word("x", "DROP")}})}},
			`Guardrail configuration error: blocked_words[0].action: must be BLOCK or MASK, got "DROP"`},
		{"bad mode", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-mode", "litellm_params": contentFilter("sometimes", nil)}},
			"Guardrail configuration error: mode: unsupported mode \"sometimes\"..."},
		{"unknown prebuilt", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-pb", "litellm_params": contentFilter("pre_call", map[string]any{
			"patterns": []any{prebuilt("passport_of_atlantis", "MASK")}})}},
			"Guardrail configuration error: patterns[0].pattern_name: unknown prebuilt pattern..."},
		{"other guardrail type", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-type", "litellm_params": map[string]any{"guardrail": "bedrock", "mode": "pre_call"}}},
			"Guardrail configuration error: guardrail: unsupported guardrail type \"bedrock\"..."},
		{"no litellm_params", map[string]any{"guardrail": map[string]any{"guardrail_name": "no-params"}},
			"Guardrail configuration error: litellm_params is required"},
		{"missing name", map[string]any{"guardrail": map[string]any{"litellm_params": contentFilter("pre_call", nil)}},
			"guardrail_name is required and cannot be empty"},
		{"blank name", map[string]any{"guardrail": map[string]any{"guardrail_name": "  ", "litellm_params": contentFilter("pre_call", nil)}},
			"guardrail_name is required and cannot be empty"},
		{"no wrapper", map[string]any{"guardrail_name": "flat", "litellm_params": contentFilter("pre_call", nil)},
			"guardrail is required..."},
		{"bad status", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-status", "status": "maybe", "litellm_params": contentFilter("pre_call", nil)}},
			"status must be one of active, pending_review, rejected..."},
		{"info not an object", map[string]any{"guardrail": map[string]any{"guardrail_name": "bad-info", "guardrail_info": []int{1}, "litellm_params": contentFilter("pre_call", nil)}},
			"guardrail_info must be a JSON object"},
		{"malformed JSON", `{"guardrail": {`, "malformed JSON body..."},
	}
	for _, tc := range bad {
		st, b := p.A.Do(t, "POST", "/guardrails", tc.body)
		require.Equal(t, 400, st, "%s: %s", tc.name, b)
		detail, ok := JSON(t, b)["detail"].(map[string]any)
		require.True(t, ok, "%s: LiteLLM detail envelope: %s", tc.name, b)
		if prefix, ok := strings.CutSuffix(tc.msg, "..."); ok {
			require.True(t, strings.HasPrefix(detail["error"].(string), prefix), "%s: %s", tc.name, b)
		} else {
			require.Equal(t, tc.msg, detail["error"], tc.name)
		}
	}
	require.Empty(t, listGuardrails(t, p.A))
	require.Empty(t, listGuardrails(t, p.B))
	require.Zero(t, queryInt(t, p.DB, "SELECT count(*) FROM gateway.guardrails"))
	st, out := apply(t, p.B, "bad-re", "x")
	require.Equal(t, 404, st)
	require.Equal(t, guardrailNotFoundMsg("bad-re"), out)

	// Duplicate name.
	createGuardrail(t, p.A, "dup", contentFilter("pre_call", nil))
	st, b := p.B.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "dup", "litellm_params": contentFilter("pre_call", nil)}})
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "Guardrail with name 'dup' already exists", errorMessage(t, b))
	require.Equal(t, 1, queryInt(t, p.DB, "SELECT count(*) FROM gateway.guardrails"))

	// Unknown ids.
	for _, m := range []string{"GET", "PUT", "PATCH", "DELETE"} {
		st, b := p.B.Do(t, m, "/guardrails/8a1c2a59-0000-4000-8000-000000000000", map[string]any{"guardrail": map[string]any{
			"guardrail_name": "ghost", "litellm_params": contentFilter("pre_call", nil)}})
		require.Equal(t, 404, st, "%s: %s", m, b)
		require.Equal(t, "Guardrail with ID 8a1c2a59-0000-4000-8000-000000000000 not found", errorMessage(t, b), m)
	}
	st, b = p.B.Do(t, "GET", "/guardrails/8a1c2a59-0000-4000-8000-000000000000/info", nil)
	require.Equal(t, 404, st, "%s", b)

	// apply_guardrail input errors.
	st, b = p.A.Do(t, "POST", "/guardrails/apply_guardrail", map[string]any{"text": "x"})
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "guardrail_name is required", errorMessage(t, b))
	st, b = p.A.Do(t, "POST", "/guardrails/apply_guardrail", map[string]any{"guardrail_name": "dup"})
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "text is required", errorMessage(t, b))
}

func TestGuardrailUpdateAndDelete(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	row := createGuardrail(t, p.A, "words", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("alpha", "BLOCK")}}))
	id := row["guardrail_id"].(string)
	path := "/guardrails/" + id
	v0 := queryInt(t, p.DB, "SELECT version FROM gateway.guardrails WHERE guardrail_id = $1", id)

	// An invalid update is refused before the database and the old version keeps serving.
	st, b := p.B.Do(t, "PUT", path, map[string]any{"guardrail": map[string]any{"guardrail_name": "words",
		"litellm_params": contentFilter("pre_call", map[string]any{"patterns": []any{map[string]any{"pattern_type": "regex", "pattern": "[", "action": "MASK"}}})}})
	require.Equal(t, 400, st, "%s", b)
	require.True(t, strings.HasPrefix(errorMessage(t, b), "Guardrail configuration error: patterns[0].pattern: invalid regex"), "%s", b)
	st, b = p.B.Do(t, "PATCH", path, map[string]any{"litellm_params": map[string]any{"mode": "never"}})
	require.Equal(t, 400, st, "%s", b)
	require.True(t, strings.HasPrefix(errorMessage(t, b), "Guardrail configuration error: mode: unsupported mode"), "%s", b)
	require.Equal(t, v0, queryInt(t, p.DB, "SELECT version FROM gateway.guardrails WHERE guardrail_id = $1", id), "nothing written")
	for _, g := range []*Gateway{p.A, p.B} {
		st, out := apply(t, g, "words", "alpha")
		require.Equal(t, 400, st, out)
	}

	// PUT replaces: visible at once on the writer (B), and on A through the change feed or
	// its read-through.
	st, b = p.B.Do(t, "PUT", path, map[string]any{"guardrail": map[string]any{"guardrail_name": "words",
		"litellm_params": contentFilter("pre_call", map[string]any{"blocked_words": []any{word("beta", "MASK")}})}})
	require.Equal(t, 200, st, "%s", b)
	put := JSON(t, b)
	require.Equal(t, map[string]any{}, put["guardrail_info"], "PUT replaces guardrail_info")
	require.Equal(t, "active", put["status"])
	st, out := apply(t, p.B, "words", "alpha beta")
	require.Equal(t, 200, st, out)
	require.Equal(t, "alpha [KEYWORD_REDACTED]", out)
	Eventually(t, "PUT visible on A", func() bool {
		_, out := apply(t, p.A, "words", "alpha beta")
		return out == "alpha [KEYWORD_REDACTED]"
	})

	// PATCH merges litellm_params and guardrail_info keys, LiteLLM's default_on shortcut too.
	st, b = p.A.Do(t, "PATCH", path, map[string]any{"guardrail_info": map[string]any{"team": "sec"}, "default_on": true,
		"litellm_params": map[string]any{"patterns": []any{prebuilt("email", "MASK")}}})
	require.Equal(t, 200, st, "%s", b)
	patched := JSON(t, b)
	params := patched["litellm_params"].(map[string]any)
	require.Equal(t, true, params["default_on"])
	require.NotEmpty(t, params["blocked_words"], "kept")
	require.NotEmpty(t, params["patterns"], "added")
	require.Equal(t, map[string]any{"team": "sec"}, patched["guardrail_info"])
	st, out = apply(t, p.A, "words", "beta to x@example.com")
	require.Equal(t, 200, st, out)
	require.Equal(t, "[KEYWORD_REDACTED] to [EMAIL_REDACTED]", out)

	// PATCH in the {"guardrail": {...}} form: rename.
	st, b = p.A.Do(t, "PATCH", path, map[string]any{"guardrail": map[string]any{"guardrail_name": "words2"}})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "words2", JSON(t, b)["guardrail_name"])
	st, _ = apply(t, p.A, "words", "beta")
	require.Equal(t, 404, st)
	st, out = apply(t, p.A, "words2", "beta")
	require.Equal(t, 200, st)
	require.Equal(t, "[KEYWORD_REDACTED]", out)
	Eventually(t, "rename visible on B", func() bool {
		st1, _ := apply(t, p.B, "words", "beta")
		st2, _ := apply(t, p.B, "words2", "beta")
		return st1 == 404 && st2 == 200
	})

	// Status away from active takes it out of service at once on the writer, then everywhere.
	st, b = p.A.Do(t, "PATCH", path, map[string]any{"status": "pending_review"})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "pending_review", JSON(t, b)["status"])
	st, _ = apply(t, p.A, "words2", "beta")
	require.Equal(t, 404, st)
	Eventually(t, "pending_review gone on B", func() bool {
		st, _ := apply(t, p.B, "words2", "beta")
		return st == 404
	})
	st, b = p.B.Do(t, "PATCH", path, map[string]any{"status": "active"})
	require.Equal(t, 200, st, "%s", b)
	st, _ = apply(t, p.B, "words2", "beta")
	require.Equal(t, 200, st)

	// DELETE.
	st, b = p.A.Do(t, "DELETE", path, nil)
	require.Equal(t, 200, st, "%s", b)
	require.JSONEq(t, `{"message": "Guardrail `+id+` deleted successfully"}`, string(b))
	st, out = apply(t, p.A, "words2", "beta")
	require.Equal(t, 404, st)
	require.Equal(t, guardrailNotFoundMsg("words2"), out)
	Eventually(t, "delete visible on B", func() bool {
		st, _ := apply(t, p.B, "words2", "beta")
		return st == 404
	})
	st, _ = p.B.Do(t, "GET", path, nil)
	require.Equal(t, 404, st)
	require.Zero(t, queryInt(t, p.DB, "SELECT count(*) FROM gateway.guardrails"))
}

func TestGuardrailConfigFileGuardrails(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: `
guardrails:
  - guardrail_name: cfg-guard
    litellm_params:
      guardrail: litellm_content_filter
      mode: [pre_call, post_call]
      blocked_words:
        - keyword: classified
          action: BLOCK
`})
	for _, g := range []*Gateway{p.A, p.B} {
		st, out := apply(t, g, "cfg-guard", "this is classified")
		require.Equal(t, 400, st, out)
		require.Equal(t, "Content blocked: keyword 'classified' detected", out)
	}
	list := listGuardrails(t, p.A)
	require.Len(t, list, 1)
	require.Equal(t, "config:cfg-guard", list[0]["guardrail_id"])
	require.Equal(t, "config", list[0]["guardrail_definition_location"])
	require.Equal(t, "litellm_content_filter", list[0]["litellm_params"].(map[string]any)["guardrail"])
	st, b := p.A.Do(t, "GET", "/guardrails/config:cfg-guard", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "cfg-guard", JSON(t, b)["guardrail_name"])

	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		st, b := p.B.Do(t, m, "/guardrails/config:cfg-guard", map[string]any{"guardrail": map[string]any{
			"guardrail_name": "cfg-guard", "litellm_params": contentFilter("pre_call", nil)}})
		require.Equal(t, 400, st, "%s: %s", m, b)
		require.Contains(t, errorMessage(t, b), "Guardrail in config", m)
	}
	st, b = p.B.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{
		"guardrail_name": "cfg-guard", "litellm_params": contentFilter("pre_call", nil)}})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, errorMessage(t, b), "already exists in the config file")
	require.Zero(t, queryInt(t, p.DB, "SELECT count(*) FROM gateway.guardrails"))
}
