package fakeupstream_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

func openaiClient(s *fakeupstream.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func anthropicClient(s *fakeupstream.Server) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(s.URL+"/"), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
}

func TestOpenAIChat(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := openaiClient(s)
	res, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello there")},
	})
	require.NoError(t, err)
	require.Len(t, res.Choices, 1)
	require.Equal(t, "fake reply to: hello there", res.Choices[0].Message.Content)
	require.Equal(t, "stop", res.Choices[0].FinishReason)
	require.Equal(t, "gpt-4o-mini", res.Model)
	require.EqualValues(t, 2, res.Usage.PromptTokens)
	require.EqualValues(t, 5, res.Usage.CompletionTokens)

	req, ok := s.LastRequest("/chat/completions")
	require.True(t, ok)
	require.Equal(t, "Bearer sk-test", req.Header.Get("Authorization"))
	require.Contains(t, string(req.Body), `"hello there"`)
}

func TestOpenAIChatStream(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t, fakeupstream.WithStreamChunks(3), fakeupstream.WithChunkDelay(time.Millisecond))
	c := openaiClient(s)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "gpt-4o-mini",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	var deltas []string
	for stream.Next() {
		chunk := stream.Current()
		require.True(t, acc.AddChunk(chunk))
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			deltas = append(deltas, chunk.Choices[0].Delta.Content)
		}
	}
	require.NoError(t, stream.Err())
	require.Len(t, deltas, 3)
	require.Equal(t, "fake reply to: stream please", strings.Join(deltas, ""))
	require.Equal(t, "fake reply to: stream please", acc.Choices[0].Message.Content)
	require.Equal(t, "stop", acc.Choices[0].FinishReason)
	require.EqualValues(t, 2, acc.Usage.PromptTokens)
}

func TestOpenAIChatToolCall(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t, fakeupstream.WithToolCalls())
	c := openaiClient(s)
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object"},
		})},
	}
	res, err := c.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)
	require.Equal(t, "tool_calls", res.Choices[0].FinishReason)
	require.Len(t, res.Choices[0].Message.ToolCalls, 1)
	require.Equal(t, "get_weather", res.Choices[0].Message.ToolCalls[0].Function.Name)
	require.JSONEq(t, `{"input":"weather in Paris"}`, res.Choices[0].Message.ToolCalls[0].Function.Arguments)

	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		require.True(t, acc.AddChunk(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices[0].Message.ToolCalls, 1)
	require.JSONEq(t, `{"input":"weather in Paris"}`, acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
}

func TestOpenAIResponses(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := openaiClient(s)
	res, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:        "gpt-4o-mini",
		Instructions: openai.String("be brief"),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hi responses")},
	})
	require.NoError(t, err)
	require.Equal(t, "fake reply to: hi responses", res.OutputText())
	require.Equal(t, responses.ResponseStatusCompleted, res.Status)
	require.EqualValues(t, 2, res.Usage.InputTokens)

	stream := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream it")},
	})
	var deltas []string
	var types []string
	var final responses.Response
	seq := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		require.Equal(t, seq+1, ev.SequenceNumber)
		seq = ev.SequenceNumber
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas = append(deltas, ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "response.created", types[0])
	require.Equal(t, "response.completed", types[len(types)-1])
	require.Equal(t, "fake reply to: stream it", strings.Join(deltas, ""))
	require.Equal(t, "fake reply to: stream it", final.OutputText())
}

func TestOpenAIEmbeddings(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := openaiClient(s)
	res, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	require.NoError(t, err)
	require.Len(t, res.Data, 2)
	require.Equal(t, fakeupstream.Vector("a", 8), res.Data[0].Embedding)
	require.Equal(t, fakeupstream.Vector("b", 8), res.Data[1].Embedding)

	res, err = c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model:          "text-embedding-3-small",
		Input:          openai.EmbeddingNewParamsInputUnion{OfString: openai.String("a")},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		Dimensions:     openai.Int(4),
	})
	require.NoError(t, err)
	require.Equal(t, fakeupstream.Vector("a", 4), res.Data[0].Embedding)
}

func TestAnthropicMessages(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t)
	c := anthropicClient(s)
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 100,
		System:    []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello claude"))},
	}
	msg, err := c.Messages.New(context.Background(), params)
	require.NoError(t, err)
	require.Len(t, msg.Content, 1)
	require.Equal(t, "fake reply to: hello claude", msg.Content[0].Text)
	require.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
	require.EqualValues(t, 2, msg.Usage.InputTokens)

	req, ok := s.LastRequest("/v1/messages")
	require.True(t, ok)
	// This SDK version sends the key as a bearer token; the fake accepts that or x-api-key.
	require.True(t, req.Header.Get("x-api-key") == "sk-ant-test" || req.Header.Get("Authorization") == "Bearer sk-ant-test", "auth headers: %v", req.Header)
	require.NotEmpty(t, req.Header.Get("anthropic-version"))

	stream := c.Messages.NewStreaming(context.Background(), params)
	acc := anthropic.Message{}
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		require.NoError(t, acc.Accumulate(ev))
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "message_start", types[0])
	require.Equal(t, "message_stop", types[len(types)-1])
	require.Equal(t, "fake reply to: hello claude", acc.Content[0].Text)
	require.Equal(t, anthropic.StopReasonEndTurn, acc.StopReason)
	require.EqualValues(t, 5, acc.Usage.OutputTokens)
}

func TestAnthropicToolUse(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t, fakeupstream.WithToolCalls())
	c := anthropicClient(s)
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather?"))},
		Tools:     []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{}}}},
	}
	msg, err := c.Messages.New(context.Background(), params)
	require.NoError(t, err)
	require.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	require.Equal(t, "get_weather", msg.Content[0].Name)
	require.JSONEq(t, `{"input":"weather?"}`, string(msg.Content[0].Input))

	stream := c.Messages.NewStreaming(context.Background(), params)
	acc := anthropic.Message{}
	for stream.Next() {
		require.NoError(t, acc.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.JSONEq(t, `{"input":"weather?"}`, string(acc.Content[0].Input))
}

func TestErrorsAndAuth(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t, fakeupstream.WithStatus(http.StatusTooManyRequests))
	oc := openaiClient(s)
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	var oerr *openai.Error
	require.True(t, errors.As(err, &oerr))
	require.Equal(t, http.StatusTooManyRequests, oerr.StatusCode)

	ac := anthropicClient(s)
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
	})
	var aerr *anthropic.Error
	require.True(t, errors.As(err, &aerr))
	require.Equal(t, http.StatusTooManyRequests, aerr.StatusCode)

	s.SetStatus(0)
	resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, err = http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","max_tokens":1,"messages":[]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Len(t, s.Requests(), 4)
}

func TestFailNextAndCut(t *testing.T) {
	t.Parallel()
	s := fakeupstream.Start(t, fakeupstream.WithStreamCutAfter(2))
	c := openaiClient(s)
	s.FailNext(1, http.StatusServiceUnavailable)
	params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	_, err := c.Chat.Completions.New(context.Background(), params)
	var oerr *openai.Error
	require.True(t, errors.As(err, &oerr))
	require.Equal(t, http.StatusServiceUnavailable, oerr.StatusCode)
	_, err = c.Chat.Completions.New(context.Background(), params)
	require.NoError(t, err)

	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	n := 0
	for stream.Next() {
		n++
	}
	require.Equal(t, 2, n)
	require.Error(t, stream.Err())
}
