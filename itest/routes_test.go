package itest

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// Every LLM route on every provider through B, right after the models were created on A, with
// the official SDKs as clients: passthrough where formats match, translation where not.
func TestAllRoutesThroughSDKs(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	ctx := context.Background()
	create := func(name, model string) {
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": name,
			"litellm_params": map[string]any{"model": model, "api_base": up.URL, "api_key": "sk-up"}})
		require.Equal(t, 200, st, "%s", b)
	}
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	an := anthropic.NewClient(aoption.WithBaseURL(p.B.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0))

	for _, prov := range []string{"openai", "anthropic"} {
		// OpenAI api_base includes /v1 (LiteLLM); Anthropic's does not.
		model := prov + "/up-model"
		chatName, msgName, respName := "chat-"+prov, "msg-"+prov, "resp-"+prov
		if prov == "openai" {
			for _, n := range []string{chatName, msgName, respName} {
				st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": n,
					"litellm_params": map[string]any{"model": model, "api_base": up.URL + "/v1", "api_key": "sk-up"}})
				require.Equal(t, 200, st, "%s", b)
			}
		} else {
			create(chatName, model)
			create(msgName, model)
			create(respName, model)
		}

		// Anthropic SDK → /v1/messages
		msg, err := an.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(msgName), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi " + prov))},
		})
		require.NoError(t, err, prov)
		require.Equal(t, "fake reply to: hi "+prov, msg.Content[0].Text, prov)

		st := an.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(msgName), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("stream " + prov))},
		})
		var acc anthropic.Message
		for st.Next() {
			require.NoError(t, acc.Accumulate(st.Current()))
		}
		require.NoError(t, st.Err(), prov)
		require.Equal(t, "fake reply to: stream "+prov, acc.Content[0].Text, prov)

		// OpenAI SDK → /v1/chat/completions
		cc, err := oa.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: chatName,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("chat " + prov)}})
		require.NoError(t, err, prov)
		require.Equal(t, "fake reply to: chat "+prov, cc.Choices[0].Message.Content)

		// OpenAI SDK → /v1/responses
		r, err := oa.Responses.New(ctx, responses.ResponseNewParams{Model: respName,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("resp " + prov)}})
		require.NoError(t, err, prov)
		require.Equal(t, "fake reply to: resp "+prov, r.OutputText())

		rs := oa.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: respName,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("rstream " + prov)}})
		var text strings.Builder
		completed := false
		for rs.Next() {
			ev := rs.Current()
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				completed = true
			}
		}
		require.NoError(t, rs.Err(), prov)
		require.True(t, completed, prov)
		require.Equal(t, "fake reply to: rstream "+prov, text.String())
	}

	// embeddings: OpenAI passthrough
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "emb",
		"litellm_params": map[string]any{"model": "openai/text-embedding-3-small", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
	require.Equal(t, 200, st, "%s", b)
	emb, err := oa.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "emb",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	require.NoError(t, err)
	require.Len(t, emb.Data, 2)
	require.NotEmpty(t, emb.Data[0].Embedding)

	// x-api-key works on /v1/messages (the Anthropic SDK sends it); errors use Anthropic's envelope
	_, err = an.Messages.New(ctx, anthropic.MessageNewParams{Model: "nope", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
	var aerr *anthropic.Error
	require.ErrorAs(t, err, &aerr)
	require.Equal(t, 400, aerr.StatusCode)
	require.Contains(t, aerr.RawJSON(), `"type":"error"`)
	require.Contains(t, aerr.RawJSON(), "anthropic_messages: Invalid model name passed in model=nope.")
}
