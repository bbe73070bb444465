package itest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 21, the matrix: {chat, responses, messages} × {openai, anthropic, gemini, bedrock,
// ollama deployments} × {plain, streamed} × {text, tool round trip, structured output, image
// in}. The five deployments are provisioned on replica A and called on replica B with the
// official SDKs (openai-go for chat and responses, anthropic-sdk-go for messages); each fake
// upstream speaks its vendor's wire format and records what it received, so every cell checks
// both ends: what the client got in its format and what reached the upstream in the vendor's.
// A cell passes, or is dropped (the field named in x-lockstep-dropped, as the translation table
// in docs/api.md says), or is refused (400 naming the field; no cell is, with base64 images and
// function tools; an image by URL is, on Gemini, Bedrock and Ollama). The matrix is printed
// with t.Log and must equal the one in docs/api.md ("Format matrix"); LOCKSTEP_MATRIX_DOC=1
// writes it there.

const (
	mxPNG       = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	mxPNGURL    = "data:image/png;base64," + mxPNG
	mxRemoteImg = "https://images.example.com/cat.png"
	mxCity      = `{"city":"Paris"}`
	mxSOPrompt  = "capital of France"
	mxImgPrompt = "what is in the image"
	mxToolText  = "weather in Paris"
	mxToolOut   = "sunny, 21 C"
)

var (
	mxSchema     = map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}, "additionalProperties": false}
	mxToolSchema = map[string]any{"type": "object", "properties": map[string]any{"input": map[string]any{"type": "string"}}, "required": []any{"input"}}
)

// mxCall is a tool call as the client received it.
type mxCall struct{ id, name, args string }

// mxAnswer is what a client got for one request.
type mxAnswer struct {
	text    string
	calls   []mxCall
	stop    string
	dropped string // x-lockstep-dropped
	status  int    // an error's HTTP status (0: answered)
	errMsg  string
}

// mxTurn is one request of a cell: the feature, and for a tool round trip's second turn the
// call being answered.
type mxTurn struct {
	feature string
	result  *mxCall
}

type mxClient func(t *testing.T, model string, stream bool, turn mxTurn) mxAnswer

func mxHeader(hr *http.Response) string {
	if hr == nil {
		return ""
	}
	return hr.Header.Get("x-lockstep-dropped")
}

func mxErr(a *mxAnswer, err error) bool {
	if err == nil {
		return false
	}
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case errors.As(err, &oe):
		a.status, a.errMsg = oe.StatusCode, oe.Message
	case errors.As(err, &ae):
		a.status, a.errMsg = ae.StatusCode, gjson.Get(ae.RawJSON(), "error.message").Str
	default:
		a.status, a.errMsg = -1, err.Error()
	}
	return true
}

// ---- chat: openai-go Chat Completions ----

func mxChat(base string) mxClient {
	oa := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	return func(t *testing.T, model string, stream bool, turn mxTurn) mxAnswer {
		p := openai.ChatCompletionNewParams{Model: model}
		switch turn.feature {
		case "text":
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hello")}
		case "tool":
			p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
				Name: "get_weather", Description: openai.String("Weather of a city"), Parameters: mxToolSchema})}
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(mxToolText)}
			if c := turn.result; c != nil {
				asst := openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.id,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.name, Arguments: c.args}}}}}
				p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &asst}, openai.ToolMessage(mxToolOut, c.id))
			}
		case "structured":
			p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
				JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "city", Schema: mxSchema}}}
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(mxSOPrompt)}
		case "image", "image_url":
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart(mxImgPrompt),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: mxImageURL(turn.feature)}),
			})}
		}
		var a mxAnswer
		var hr *http.Response
		var msg openai.ChatCompletionMessage
		if stream {
			cs := oa.Chat.Completions.NewStreaming(context.Background(), p, option.WithResponseInto(&hr))
			var acc openai.ChatCompletionAccumulator
			for cs.Next() {
				acc.AddChunk(cs.Current())
			}
			a.dropped = mxHeader(hr)
			if mxErr(&a, cs.Err()) {
				return a
			}
			require.NotEmpty(t, acc.Choices, "no choices streamed")
			msg, a.stop = acc.Choices[0].Message, acc.Choices[0].FinishReason
		} else {
			cc, err := oa.Chat.Completions.New(context.Background(), p, option.WithResponseInto(&hr))
			a.dropped = mxHeader(hr)
			if mxErr(&a, err) {
				return a
			}
			require.NotEmpty(t, cc.Choices)
			msg, a.stop = cc.Choices[0].Message, cc.Choices[0].FinishReason
		}
		a.text = msg.Content
		for _, c := range msg.ToolCalls {
			a.calls = append(a.calls, mxCall{id: c.ID, name: c.Function.Name, args: c.Function.Arguments})
		}
		return a
	}
}

// ---- responses: openai-go Responses ----

func mxResponses(base string) mxClient {
	oa := openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	return func(t *testing.T, model string, stream bool, turn mxTurn) mxAnswer {
		p := responses.ResponseNewParams{Model: model}
		var opts []option.RequestOption
		user := func(text string) responses.ResponseNewParamsInputUnion {
			return responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}
		}
		switch turn.feature {
		case "text":
			p.Input = user("say hello")
		case "tool":
			p.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
				Description: openai.String("Weather of a city"), Parameters: mxToolSchema, Strict: openai.Bool(false)}}}
			p.Input = user(mxToolText)
			if c := turn.result; c != nil {
				p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage(mxToolText, responses.EasyInputMessageRoleUser),
					responses.ResponseInputItemParamOfFunctionCall(c.args, c.id, c.name),
					mxCallOutput(c.id),
				}}
			}
		case "structured":
			p.Input = user(mxSOPrompt)
			p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "city", Schema: mxSchema}}}
		case "image", "image_url":
			p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
					responses.ResponseInputContentParamOfInputText(mxImgPrompt),
					{OfInputImage: &responses.ResponseInputImageParam{Detail: responses.ResponseInputImageDetailAuto, ImageURL: openai.String(mxImageURL(turn.feature))}},
				}, responses.EasyInputMessageRoleUser),
			}}
		}
		var a mxAnswer
		var hr *http.Response
		opts = append(opts, option.WithResponseInto(&hr))
		var r *responses.Response
		if stream {
			st := oa.Responses.NewStreaming(context.Background(), p, opts...)
			for st.Next() {
				if ev := st.Current(); ev.Type == "response.completed" {
					done := ev.Response
					r = &done
				}
			}
			a.dropped = mxHeader(hr)
			if mxErr(&a, st.Err()) {
				return a
			}
			require.NotNil(t, r, "no response.completed event")
		} else {
			var err error
			r, err = oa.Responses.New(context.Background(), p, opts...)
			a.dropped = mxHeader(hr)
			if mxErr(&a, err) {
				return a
			}
		}
		a.text, a.stop = r.OutputText(), string(r.Status)
		for _, it := range r.Output {
			if it.Type == "function_call" {
				a.calls = append(a.calls, mxCall{id: it.CallID, name: it.Name, args: it.Arguments.OfString})
			}
		}
		return a
	}
}

func mxCallOutput(id string) responses.ResponseInputItemUnionParam {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(mxToolOut)
	out.OfFunctionCallOutput.CallID = openai.String(id)
	return out
}

// mxImageURL is the image a cell sends: a base64 data: URL ("image"), or a remote URL
// ("image_url").
func mxImageURL(feature string) string {
	if feature == "image_url" {
		return mxRemoteImg
	}
	return mxPNGURL
}

// ---- messages: anthropic-sdk-go Messages ----

func mxMessages(base string) mxClient {
	an := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0))
	return func(t *testing.T, model string, stream bool, turn mxTurn) mxAnswer {
		p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256}
		switch turn.feature {
		case "text":
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hello"))}
		case "tool":
			p.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather of a city"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: mxToolSchema["properties"], Required: []string{"input"}}}}}
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(mxToolText))}
			if c := turn.result; c != nil {
				p.Messages = append(p.Messages,
					anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(c.id, json.RawMessage(c.args), c.name)),
					anthropic.NewUserMessage(anthropic.NewToolResultBlock(c.id, mxToolOut, false)))
			}
		case "structured":
			p.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: mxSchema}}
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(mxSOPrompt))}
		case "image":
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(mxImgPrompt), anthropic.NewImageBlockBase64("image/png", mxPNG))}
		case "image_url":
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(mxImgPrompt), anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: mxRemoteImg}))}
		}
		var a mxAnswer
		var hr *http.Response
		var msg anthropic.Message
		if stream {
			st := an.Messages.NewStreaming(context.Background(), p, aoption.WithResponseInto(&hr))
			for st.Next() {
				require.NoError(t, msg.Accumulate(st.Current()))
			}
			a.dropped = mxHeader(hr)
			if mxErr(&a, st.Err()) {
				return a
			}
		} else {
			m, err := an.Messages.New(context.Background(), p, aoption.WithResponseInto(&hr))
			a.dropped = mxHeader(hr)
			if mxErr(&a, err) {
				return a
			}
			msg = *m
		}
		a.stop = string(msg.StopReason)
		for _, b := range msg.Content {
			switch b.Type {
			case "text":
				a.text += b.Text
			case "tool_use":
				a.calls = append(a.calls, mxCall{id: b.ID, name: b.Name, args: string(b.Input)})
			}
		}
		return a
	}
}

// ---- the vendors: what each upstream must have received ----

type mxVendor struct {
	name  string
	up    *fakeupstream.Server
	model map[string]any
	// api is the upstream API a client format reaches on this vendor.
	api func(client string) string
}

// mxUserParts returns the parts of the last user turn the upstream received, in its format.
func mxLastTurn(api string, body gjson.Result) gjson.Result {
	switch api {
	case "chat", "ollama", "messages", "bedrock":
		return body.Get("messages.@reverse.0")
	case "responses":
		if in := body.Get("input"); in.Type == gjson.String {
			return in // the input as one user text
		}
		return body.Get("input.@reverse.0")
	case "gemini":
		return body.Get("contents.@reverse.0")
	}
	return gjson.Result{}
}

// mxCheckUpstream checks the vendor's form of a feature in the body the upstream received.
func mxCheckUpstream(t *testing.T, api string, turn mxTurn, body gjson.Result) {
	last := mxLastTurn(api, body)
	raw := body.Raw
	switch turn.feature {
	case "text":
		require.Contains(t, last.Raw, "say hello", raw)
	case "tool":
		if turn.result == nil { // the tool declared in the vendor's form
			name := map[string]string{"chat": "tools.0.function.name", "ollama": "tools.0.function.name", "responses": "tools.0.name",
				"messages": "tools.0.name", "gemini": "tools.0.functionDeclarations.0.name", "bedrock": "toolConfig.tools.0.toolSpec.name"}[api]
			require.Equal(t, "get_weather", body.Get(name).Str, raw)
			return
		}
		c := turn.result
		switch api {
		case "chat":
			require.Equal(t, "tool", last.Get("role").Str, raw)
			require.Equal(t, c.id, last.Get("tool_call_id").Str, raw)
			require.Equal(t, mxToolOut, contentText(last.Get("content")), raw)
			require.Equal(t, c.id, body.Get("messages.@reverse.1.tool_calls.0.id").Str, raw)
		case "ollama":
			require.Equal(t, "tool", last.Get("role").Str, raw)
			require.Equal(t, mxToolOut, last.Get("content").Str, raw)
			require.Equal(t, "get_weather", body.Get("messages.@reverse.1.tool_calls.0.function.name").Str, raw)
		case "responses":
			require.Equal(t, "function_call_output", last.Get("type").Str, raw)
			require.Equal(t, c.id, last.Get("call_id").Str, raw)
			require.Equal(t, mxToolOut, last.Get("output").Str, raw)
		case "messages":
			tr := last.Get(`content.#(type=="tool_result")`)
			require.Equal(t, c.id, tr.Get("tool_use_id").Str, raw)
			require.Equal(t, mxToolOut, contentText(tr.Get("content")), raw)
			require.Equal(t, c.id, body.Get(`messages.@reverse.1.content.#(type=="tool_use").id`).Str, raw)
		case "gemini":
			fr := last.Get("parts.#(functionResponse).functionResponse")
			require.Equal(t, "get_weather", fr.Get("name").Str, raw)
			require.Equal(t, mxToolOut, fr.Get("response.content").Str, raw)
			require.Equal(t, "model", body.Get("contents.@reverse.1.role").Str, raw)
			require.Equal(t, "get_weather", body.Get("contents.@reverse.1.parts.0.functionCall.name").Str, raw)
		case "bedrock":
			tr := last.Get("content.#(toolResult).toolResult")
			require.Equal(t, c.id, tr.Get("toolUseId").Str, raw)
			require.Equal(t, mxToolOut, tr.Get("content.0.text").Str, raw)
			require.Equal(t, c.id, body.Get("messages.@reverse.1.content.0.toolUse.toolUseId").Str, raw)
		}
	case "structured":
		wantSchema, _ := json.Marshal(mxSchema)
		switch api {
		case "chat":
			require.Equal(t, "json_schema", body.Get("response_format.type").Str, raw)
			require.JSONEq(t, string(wantSchema), body.Get("response_format.json_schema.schema").Raw, raw)
		case "responses":
			require.Equal(t, "json_schema", body.Get("text.format.type").Str, raw)
			require.JSONEq(t, string(wantSchema), body.Get("text.format.schema").Raw, raw)
		case "messages":
			require.Equal(t, "json_schema", body.Get("output_config.format.type").Str, raw)
			require.JSONEq(t, string(wantSchema), body.Get("output_config.format.schema").Raw, raw)
		case "gemini": // LiteLLM's mapping: JSON mime type plus the schema
			require.Equal(t, "application/json", body.Get("generationConfig.responseMimeType").Str, raw)
			require.JSONEq(t, string(wantSchema), body.Get("generationConfig.responseJsonSchema").Raw, raw)
		case "bedrock": // LiteLLM's mapping: the forced json_tool_call tool with the schema
			require.Equal(t, "json_tool_call", body.Get("toolConfig.tools.0.toolSpec.name").Str, raw)
			require.JSONEq(t, string(wantSchema), body.Get("toolConfig.tools.0.toolSpec.inputSchema.json").Raw, raw)
			require.Equal(t, "json_tool_call", body.Get("toolConfig.toolChoice.tool.name").Str, raw)
		case "ollama": // LiteLLM's mapping: format is the schema
			require.JSONEq(t, string(wantSchema), body.Get("format").Raw, raw)
		}
	case "image":
		switch api {
		case "chat":
			require.Equal(t, mxPNGURL, last.Get(`content.#(type=="image_url").image_url.url`).Str, raw)
		case "responses":
			require.Equal(t, mxPNGURL, last.Get(`content.#(type=="input_image").image_url`).Str, raw)
		case "messages":
			src := last.Get(`content.#(type=="image").source`)
			require.JSONEq(t, `{"type":"base64","media_type":"image/png","data":"`+mxPNG+`"}`, src.Raw, raw)
		case "gemini":
			require.JSONEq(t, `{"mimeType":"image/png","data":"`+mxPNG+`"}`, last.Get("parts.#(inlineData).inlineData").Raw, raw)
		case "bedrock":
			require.JSONEq(t, `{"format":"png","source":{"bytes":"`+mxPNG+`"}}`, last.Get("content.#(image).image").Raw, raw)
		case "ollama":
			require.Equal(t, []any{mxPNG}, last.Get("images").Value(), raw)
		}
	case "image_url": // only the OpenAI-format and Anthropic upstreams take an image by URL
		switch api {
		case "chat":
			require.Equal(t, mxRemoteImg, last.Get(`content.#(type=="image_url").image_url.url`).Str, raw)
		case "responses":
			require.Equal(t, mxRemoteImg, last.Get(`content.#(type=="input_image").image_url`).Str, raw)
		case "messages":
			require.JSONEq(t, `{"type":"url","url":"`+mxRemoteImg+`"}`, last.Get(`content.#(type=="image").source`).Raw, raw)
		default:
			t.Fatalf("no image URL reaches %s", api)
		}
	}
}

// contentText is a chat/Anthropic content's text: a string, or its text parts joined.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var out []string
	c.ForEach(func(_, p gjson.Result) bool {
		out = append(out, p.Get("text").Str)
		return true
	})
	return strings.Join(out, "")
}

// mxDropped is what the translation table says is dropped for a cell ("" = nothing): no
// cell drops a field now (structured output gets each vendor's own form, mxCheckUpstream).
func mxDropped(client, vendor, feature string) string {
	return ""
}

// mxRefused is the 400 the translation table gives a cell ("" = none): Gemini, Bedrock and
// Ollama take base64 images only.
func mxRefused(vendor, feature string) string {
	if feature != "image_url" {
		return ""
	}
	switch vendor {
	case "gemini":
		return "messages: image URLs cannot be sent to provider gemini; send a base64 data: URL or a gs:// URI"
	case "bedrock", "ollama":
		return "messages: image URLs cannot be sent to provider " + vendor + "; send the image as a base64 data: URL"
	}
	return ""
}

func mxLastBody(t *testing.T, up *fakeupstream.Server) gjson.Result {
	reqs := up.Requests()
	require.NotEmpty(t, reqs, "the upstream received nothing")
	return gjson.ParseBytes(reqs[len(reqs)-1].Body)
}

func TestFormatMatrix(t *testing.T) {
	t.Parallel()
	reply := fakeupstream.WithReply(func(in fakeupstream.ReplyInput) string {
		if in.Text == mxSOPrompt {
			return mxCity // the model follows the format it was asked for
		}
		return "fake reply to: " + in.Text
	})
	tools := fakeupstream.WithToolCalls()
	brc := fakeupstream.Bedrock{Region: "us-east-1", AccessKeyID: "AKIAMATRIXTEST001", SecretAccessKey: "matrix/test/secret/001"}
	oaUp, anUp := fakeupstream.Start(t, reply, tools), fakeupstream.Start(t, reply, tools)
	gemUp, brUp, olUp := fakeupstream.StartGemini(t, "gem-matrix-key", reply, tools), fakeupstream.StartBedrock(t, brc, reply, tools), fakeupstream.StartOllama(t, reply, tools)
	same := func(api string) func(string) string { return func(string) string { return api } }
	vendors := []mxVendor{
		{"openai", oaUp, map[string]any{"model": "openai/gpt-4o", "api_base": oaUp.URL + "/v1", "api_key": "sk-up"},
			func(c string) string {
				return map[string]string{"chat": "chat", "responses": "responses", "messages": "chat"}[c]
			}},
		{"anthropic", anUp, map[string]any{"model": "anthropic/claude-sonnet-4-5-20250929", "api_base": anUp.URL, "api_key": "sk-up-ant"}, same("messages")},
		{"gemini", gemUp, map[string]any{"model": "gemini/gemini-2.0-flash", "api_base": gemUp.URL, "api_key": "gem-matrix-key"}, same("gemini")},
		{"bedrock", brUp, map[string]any{"model": "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "api_base": brUp.URL,
			"aws_region_name": brc.Region, "aws_access_key_id": brc.AccessKeyID, "aws_secret_access_key": brc.SecretAccessKey},
			func(c string) string { // /v1/messages on Claude: InvokeModel with Anthropic's body
				return map[string]string{"chat": "bedrock", "responses": "bedrock", "messages": "messages"}[c]
			}},
		{"ollama", olUp, map[string]any{"model": "ollama/llama3.2", "api_base": olUp.URL}, same("ollama")},
	}
	p := StartPair(t, GatewayOpts{})
	for _, v := range vendors {
		createModel(t, p.A, "mx-"+v.name, v.model)
	}
	clients := []struct {
		name string
		do   mxClient
	}{{"chat", mxChat(p.B.URL)}, {"responses", mxResponses(p.B.URL)}, {"messages", mxMessages(p.B.URL)}}
	features := []string{"text", "tool", "structured", "image", "image_url"}

	cells := map[string]string{}
	for _, c := range clients {
		for _, v := range vendors {
			for _, stream := range []bool{false, true} {
				for _, f := range features {
					mode := "plain"
					if stream {
						mode = "streamed"
					}
					key := c.name + "|" + v.name + "|" + mode + "|" + f
					cells[key] = "FAIL"
					t.Run(strings.ReplaceAll(key, "|", "/"), func(t *testing.T) {
						cells[key] = mxRun(t, c.do, v, c.name, stream, f)
					})
				}
			}
		}
	}
	doc := mxRender(cells, vendors, features)
	t.Log("\n" + doc)
	if t.Failed() {
		return
	}
	// docs/api.md carries this run's matrix between the markers: regenerated with
	// LOCKSTEP_MATRIX_DOC=1, otherwise it must be the committed one.
	const path, begin, end = "../docs/api.md", "<!-- matrix:begin (generated by itest TestFormatMatrix) -->\n", "<!-- matrix:end -->"
	api, err := os.ReadFile(path)
	require.NoError(t, err)
	pre, rest, ok := strings.Cut(string(api), begin)
	require.True(t, ok, "docs/api.md has no matrix marker")
	old, post, ok := strings.Cut(rest, end)
	require.True(t, ok, "docs/api.md has no matrix end marker")
	if os.Getenv("LOCKSTEP_MATRIX_DOC") != "" {
		require.NoError(t, os.WriteFile(path, []byte(pre+begin+doc+end+post), 0o644))
		return
	}
	require.Equal(t, doc, old, "docs/api.md's matrix is not this run's: regenerate it with LOCKSTEP_MATRIX_DOC=1 go test ./itest/ -run TestFormatMatrix")
}

// mxRun runs one cell and returns its matrix entry.
func mxRun(t *testing.T, do mxClient, v mxVendor, client string, stream bool, feature string) string {
	v.up.Reset()
	model := "mx-" + v.name
	api := v.api(client)
	turn := mxTurn{feature: feature}
	a := do(t, model, stream, turn)
	if refused := mxRefused(v.name, feature); refused != "" {
		require.Equal(t, http.StatusBadRequest, a.status, "refused with 400 (%s)", a.errMsg)
		require.Equal(t, refused, a.errMsg)
		require.Empty(t, v.up.Requests(), "no upstream call for a refused request")
		return "refused (400 `" + refused + "`)"
	}
	require.Zero(t, a.status, "error %d: %s", a.status, a.errMsg)
	want := mxDropped(client, v.name, feature)
	require.Equal(t, want, a.dropped, "x-lockstep-dropped")
	mxCheckUpstream(t, api, turn, mxLastBody(t, v.up))
	switch feature {
	case "text":
		require.Equal(t, "fake reply to: say hello", a.text)
	case "image", "image_url":
		require.Equal(t, "fake reply to: "+mxImgPrompt, a.text)
	case "structured":
		require.JSONEq(t, mxCity, a.text)
	case "tool":
		require.Len(t, a.calls, 1, "the model's tool call in the client's format (text %q)", a.text)
		call := a.calls[0]
		require.Equal(t, "get_weather", call.name)
		require.NotEmpty(t, call.id)
		require.JSONEq(t, `{"input":"`+mxToolText+`"}`, call.args)
		require.Equal(t, map[string]string{"chat": "tool_calls", "responses": "completed", "messages": "tool_use"}[client], a.stop)
		// Second turn: the tool's result reaches the upstream in the vendor's format.
		v.up.Reset()
		turn.result = &call
		a2 := do(t, model, stream, turn)
		require.Zero(t, a2.status, "second turn: error %d: %s", a2.status, a2.errMsg)
		require.Empty(t, a2.dropped, "second turn: x-lockstep-dropped")
		mxCheckUpstream(t, api, turn, mxLastBody(t, v.up))
		require.Empty(t, a2.calls, "second turn: no new tool call")
		require.NotEmpty(t, a2.text, "second turn: the answer text")
	}
	if want != "" {
		return "dropped (`x-lockstep-dropped: " + want + "`)"
	}
	return "pass"
}

// mxRender renders the matrix as Markdown: one table per client format, a row per vendor and
// mode, a column per feature.
func mxRender(cells map[string]string, vendors []mxVendor, features []string) string {
	var b strings.Builder
	b.WriteString("| route | deployment | mode | text | tool round trip | structured output | image in (base64) | image in (URL) |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range []string{"chat", "responses", "messages"} {
		for _, v := range vendors {
			for _, mode := range []string{"plain", "streamed"} {
				fmt.Fprintf(&b, "| %s | `%s` | %s |", c, v.model["model"], mode)
				for _, f := range features {
					fmt.Fprintf(&b, " %s |", cells[c+"|"+v.name+"|"+mode+"|"+f])
				}
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}
