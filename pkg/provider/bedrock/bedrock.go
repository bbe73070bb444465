// Package bedrock is the provider.Vendor of Amazon Bedrock (LiteLLM's bedrock provider: the
// Converse API, InvokeModel for embeddings and for /v1/messages on Claude models), registered by cmd/gateway:
// provider.NewBuilder(policy, bedrock.Vendor, …).
package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// Amazon Bedrock's Converse API (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html):
// POST {endpoint}/model/{modelId}/converse, and /converse-stream answered in the AWS
// event-stream framing (application/vnd.amazon.eventstream). Requests are signed with AWS
// Signature Version 4 (service "bedrock") by the AWS SDK for Go v2 signer. Mappings follow
// LiteLLM (litellm/llms/bedrock/chat/converse_transformation.py).
type bedrockAPI struct{}

var _ provider.OutputFormatWire = bedrockAPI{}

// RendersOutputFormat: structured output is the forced json_tool_call tool (see
// bedrockAPI.Request).
func (bedrockAPI) RendersOutputFormat() {}

// Vendor serves the bedrock/<model-id> prefix.
var Vendor = provider.Vendor{Names: []string{"bedrock"}, DerivedBase: true, Setup: setupBedrock}

// setupBedrock finishes a bedrock/<model-id> deployment (LiteLLM's bedrock provider):
//
//   - aws_region_name (env AWS_REGION, else AWS_DEFAULT_REGION) picks
//     https://bedrock-runtime.{region}.amazonaws.com; api_base or aws_bedrock_runtime_endpoint
//     replaces it. Without any of them the deployment loads and its region is resolved on its
//     first call (callRegion: AWS_REGION_NAME, AWS_REGION, AWS_DEFAULT_REGION, the AWS shared
//     config, else us-west-2, as LiteLLM).
//   - Credentials: aws_access_key_id + aws_secret_access_key (+ aws_session_token), else the
//     AWS SDK's default chain (environment, shared config and credentials files with
//     aws_profile_name, web identity, ECS/EC2 roles), resolved on first use and cached until
//     they expire. A database object may use the chain only when allowed_env_secrets allows
//     AWS_SECRET_ACCESS_KEY (implicitChain).
//   - A "converse/" or "invoke/" prefix on the model id (LiteLLM's route hints) is dropped.
//   - Claude models (anthropic.claude-*, with or without a region prefix; not under
//     "converse/") serve /v1/messages through InvokeModel with Anthropic's own body
//     (invokeMessages); chat and responses go through Converse.
func setupBedrock(s *provider.Setup) error {
	d := s.Deployment()
	bs, region, profile, err := awsSigner(s, "bedrock")
	if err != nil {
		return err
	}
	endpoint, err := s.ParamOrEnv("aws_bedrock_runtime_endpoint", "")
	if err != nil {
		return err
	}
	if region == "" && d.MockResponse != nil {
		return nil
	}
	base, err := awsBase(s, bs, region, profile, endpoint, "bedrock-runtime")
	if err != nil {
		return err
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("litellm_params.aws_bedrock_runtime_endpoint: %q is not an http(s) URL", base)
	}
	s.SetAPIBase(strings.TrimRight(base, "/"))
	// "converse/" (LiteLLM's route hint) keeps /v1/messages on Converse; "invoke/" or a Claude
	// model id sends it to InvokeModel with Anthropic's own body (invokeMessages).
	converse := strings.HasPrefix(d.Model, "converse/")
	s.SetModel(strings.TrimPrefix(strings.TrimPrefix(d.Model, "converse/"), "invoke/"))
	// The model id is one path segment with ":" escaped too, as the AWS SDKs send it
	// ("anthropic.claude-3-haiku-20240307-v1%3A0").
	prefix := d.APIBase + "/model/" + strings.ReplaceAll(url.PathEscape(d.Model), ":", "%3A")
	s.SetWire(bedrockAPI{}, prefix+"/converse", prefix+"/converse-stream")
	s.SetEmbedder(bedrockEmbedder(d.Model, prefix+"/invoke"))
	if !converse && isClaude(d.Model) {
		s.SetMessagesWire(prefix+"/invoke", prefix+"/invoke-with-response-stream", invokeMessages{})
	}
	s.SetHeader("Accept", "application/json")
	s.SetSigner(bs)
	return nil
}

// bedrockSigner signs each request with SigV4 for service "bedrock".
type bedrockSigner struct {
	signer *v4.Signer
	region string
	// lazyRegion: the deployment names no region (nor an endpoint): it is resolved on the
	// first call (callRegion) and each request goes to bedrock-runtime.<region>.amazonaws.com
	// (runtime.sagemaker.<region>.amazonaws.com)
	lazyRegion *provider.Lazy[string]
	// regionHost: the endpoint is the region's own (no endpoint or api_base given): the
	// request's host is set from the resolved region
	regionHost bool
	// service is the SigV4 service: "" for bedrock, "sagemaker"
	service string
	creds   aws.CredentialsProvider                 // static keys (a CredentialsCache); nil with the chain
	chain   *provider.Lazy[aws.CredentialsProvider] // the AWS default chain, loaded on first use
}

// sign signs req. Only successes are cached: the default chain's configuration is loaded
// again after a failed load (provider.Lazy), and its CredentialsCache keeps credentials until
// shortly before they expire and retrieves again after a failed retrieval.
func (b *bedrockSigner) Sign(ctx context.Context, req *http.Request, body []byte) error {
	cp := b.creds
	if b.chain != nil {
		var err error
		if cp, err = b.chain.Get(); err != nil {
			return &format.UpstreamError{Status: 401, Type: "authentication_error", Message: "bedrock: load AWS credentials: " + err.Error()}
		}
	}
	creds, err := cp.Retrieve(ctx)
	if err != nil {
		if credentialsUnavailable(err) {
			return &format.UpstreamError{Status: 502, Message: "bedrock: get AWS credentials: " + err.Error(), Retryable: true}
		}
		return &format.UpstreamError{Status: 401, Type: "authentication_error", Message: "bedrock: no AWS credentials: set aws_access_key_id/aws_secret_access_key or configure the AWS credential chain: " + err.Error()}
	}
	service, host := b.service, "bedrock-runtime."
	if service == "" {
		service = "bedrock"
	} else {
		host = "runtime." + service + "."
	}
	region := b.region
	if b.lazyRegion != nil {
		region, _ = b.lazyRegion.Get() // callRegion never fails
	}
	if b.regionHost {
		u := *req.URL // the endpoint's parsed URL is shared: a copy
		u.Host = host + region + ".amazonaws.com"
		req.URL, req.Host = &u, u.Host
	}
	sum := sha256.Sum256(body)
	if err := b.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, region, time.Now()); err != nil {
		return &format.UpstreamError{Status: 500, Message: service + ": sign request: " + err.Error()}
	}
	return nil
}

// credentialsUnavailable reports whether a credential retrieval failed for a transient reason —
// the credentials endpoint (container, instance metadata, STS, SSO) answered 5xx or 429, or
// could not be reached — rather than because there are no valid credentials: a 502 another
// deployment (or the next call) may not hit.
func credentialsUnavailable(err error) bool {
	var he interface{ HTTPStatusCode() int }
	if errors.As(err, &he) {
		code := he.HTTPStatusCode()
		return code >= 500 || code == 429
	}
	var ne net.Error
	return errors.As(err, &ne)
}

type bedrockBlock struct {
	Text       *string            `json:"text,omitempty"`
	Image      *bedrockImage      `json:"image,omitempty"`
	ToolUse    *bedrockToolUse    `json:"toolUse,omitempty"`
	ToolResult *bedrockToolResult `json:"toolResult,omitempty"`
}

type bedrockImage struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"`
	} `json:"source"`
}

type bedrockToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type bedrockToolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []map[string]string `json:"content"`
	Status    string              `json:"status,omitempty"`
}

type bedrockMessage struct {
	Role    string         `json:"role"`
	Content []bedrockBlock `json:"content"`
}

func (bedrockAPI) Request(d *provider.Deployment, r *format.Request) ([]byte, error) {
	type toolSpec struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON json.RawMessage `json:"json"`
		} `json:"inputSchema"`
	}
	type tool struct {
		ToolSpec toolSpec `json:"toolSpec"`
	}
	type toolConfig struct {
		Tools      []tool         `json:"tools"`
		ToolChoice map[string]any `json:"toolChoice,omitempty"`
	}
	body := struct {
		Messages        []bedrockMessage    `json:"messages"`
		System          []map[string]string `json:"system,omitempty"`
		InferenceConfig map[string]any      `json:"inferenceConfig,omitempty"`
		ToolConfig      *toolConfig         `json:"toolConfig,omitempty"`
		Additional      map[string]any      `json:"additionalModelRequestFields,omitempty"`
	}{Messages: make([]bedrockMessage, 0, len(r.Messages()))}
	for _, s := range r.System() {
		body.System = append(body.System, map[string]string{"text": s})
	}
	for _, m := range r.Messages() {
		bm := bedrockMessage{Role: m.Role()}
		for _, p := range m.Parts() {
			switch p.Kind() {
			case format.PartText:
				if p.Text() == "" {
					continue // Bedrock rejects blank text blocks
				}
				t := p.Text()
				bm.Content = append(bm.Content, bedrockBlock{Text: &t})
			case format.PartImage:
				mt, data, ok := format.Base64Image(p.URL())
				if !ok {
					return nil, format.BadRequest("messages: image URLs cannot be sent to provider %s; send the image as a base64 data: URL", d.Provider)
				}
				img := &bedrockImage{Format: strings.TrimPrefix(mt, "image/")}
				img.Source.Bytes = data
				bm.Content = append(bm.Content, bedrockBlock{Image: img})
			case format.PartToolUse:
				bm.Content = append(bm.Content, bedrockBlock{ToolUse: &bedrockToolUse{ToolUseID: p.ID(), Name: p.Name(), Input: format.ValidObject(p.Args())}})
			case format.PartToolResult:
				tr := &bedrockToolResult{ToolUseID: p.ID(), Content: []map[string]string{{"text": p.Text()}}}
				if p.IsError() {
					tr.Status = "error"
				}
				bm.Content = append(bm.Content, bedrockBlock{ToolResult: tr})
			}
		}
		if len(bm.Content) > 0 {
			body.Messages = append(body.Messages, bm)
		}
	}
	ic := map[string]any{}
	if r.MaxTokens() > 0 {
		ic["maxTokens"] = r.MaxTokens()
	}
	if r.Temperature() != "" {
		ic["temperature"] = json.RawMessage(r.Temperature())
	}
	if r.TopP() != "" {
		ic["topP"] = json.RawMessage(r.TopP())
	}
	if len(r.StopSequences()) > 0 {
		ic["stopSequences"] = r.StopSequences()
	}
	if len(ic) > 0 {
		body.InferenceConfig = ic
	}
	if r.TopK() != "" {
		body.Additional = map[string]any{"top_k": json.RawMessage(r.TopK())}
	}
	kind, schema := r.OutputFormat()
	if len(r.Tools()) > 0 || kind != "" {
		tc := &toolConfig{}
		for _, t := range r.Tools() {
			ts := toolSpec{Name: t.Name(), Description: t.Description()}
			ts.InputSchema.JSON = json.RawMessage(format.SchemaOrEmpty(t.Schema()))
			tc.Tools = append(tc.Tools, tool{ToolSpec: ts})
		}
		mode, name := r.ToolChoice()
		switch mode {
		case "auto":
			tc.ToolChoice = map[string]any{"auto": struct{}{}}
		case "any":
			tc.ToolChoice = map[string]any{"any": struct{}{}}
		case "tool":
			tc.ToolChoice = map[string]any{"tool": map[string]string{"name": name}}
		}
		// Structured output as LiteLLM sends response_format to Converse
		// (converse_transformation.py, _create_json_tool_call_for_response_format): the
		// forced tool json_tool_call whose inputSchema is the schema (json_object: any
		// object); its toolUse input is answered as the message text (UseJSONTool).
		if kind != "" {
			ts := toolSpec{Name: format.JSONToolName}
			ts.InputSchema.JSON = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":true}`)
			if kind == "json_schema" {
				ts.InputSchema.JSON = json.RawMessage(format.SchemaOrEmpty(schema))
			}
			tc.Tools = append(tc.Tools, tool{ToolSpec: ts})
			tc.ToolChoice = map[string]any{"tool": map[string]string{"name": format.JSONToolName}}
			r.UseJSONTool()
		}
		body.ToolConfig = tc
	}
	return format.Marshal(body), nil
}

// bedrockStop maps Converse's stopReason.
func bedrockStop(s string) format.Stop {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return format.StopLength
	case "tool_use":
		return format.StopTool
	case "stop_sequence":
		return format.StopSequence
	case "guardrail_intervened", "content_filtered":
		return format.StopFilter
	}
	return format.StopEnd
}

// bedrockUsage reads Converse's usage: inputTokens excludes cache reads and writes, which
// are added (OpenAI counts every prompt token).
func bedrockUsage(u gjson.Result) format.Tokens {
	cr, cw := u.Get("cacheReadInputTokens").Int(), u.Get("cacheWriteInputTokens").Int()
	return format.Tokens{In: u.Get("inputTokens").Int() + cr + cw, Out: u.Get("outputTokens").Int(), CacheRead: cr, CacheWrite: cw}
}

func (bedrockAPI) Result(raw []byte) (*format.Result, error) {
	if !format.ValidJSON(raw) {
		return nil, format.ErrBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	r := format.NewResult(format.NewID("chatcmpl-"), "")
	j.Get("output.message.content").ForEach(func(_, c gjson.Result) bool {
		switch {
		case c.Get("text").Exists():
			r.AddText(c.Get("text").Str)
		case c.Get("toolUse").Exists():
			tu := c.Get("toolUse")
			r.AddToolCall(tu.Get("toolUseId").Str, tu.Get("name").Str, format.ArgsText(tu.Get("input")))
		}
		return true
	})
	r.SetStop(bedrockStop(j.Get("stopReason").Str))
	r.SetUsage(bedrockUsage(j.Get("usage")))
	return r, nil
}

func (bedrockAPI) Frames(body io.Reader) provider.FrameReader {
	return &eventStreamReader{r: body, dec: eventstream.NewDecoder()}
}

// eventStreamReader reads AWS event-stream messages (binary frames with a prelude CRC, typed
// headers and a message CRC, decoded by the AWS SDK's eventstream package). The event name is
// the :event-type header, or "exception:<:exception-type>" for exception messages.
type eventStreamReader struct {
	r     io.Reader
	dec   *eventstream.Decoder
	buf   []byte
	event []byte
	data  []byte
}

func (e *eventStreamReader) Next() error {
	msg, err := e.dec.Decode(e.r, e.buf[:0])
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return format.ErrTruncated
		}
		return err
	}
	e.buf, e.data = msg.Payload, msg.Payload
	e.event = e.event[:0]
	switch header(msg, ":message-type") {
	case "exception", "error":
		typ := header(msg, ":exception-type")
		if typ == "" {
			typ = header(msg, ":error-code")
		}
		e.event = append(append(e.event, "exception:"...), typ...)
	default:
		e.event = append(e.event, header(msg, ":event-type")...)
	}
	return nil
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

func (e *eventStreamReader) Current() (raw, event, data []byte) { return e.data, e.event, e.data }

func (bedrockAPI) Decoder(r format.Renderer, model string) format.Decoder {
	return &bedrockDecoder{r: r, model: model}
}

// bedrockDecoder reads ConverseStream events: messageStart, contentBlockStart (tool use),
// contentBlockDelta (text or tool input JSON), contentBlockStop, messageStop (stopReason),
// metadata (usage; the last event).
type bedrockDecoder struct {
	r       format.Renderer
	model   string
	started bool
	stopped bool
	stop    format.Stop
	usage   format.Tokens
}

func (d *bedrockDecoder) begin(b []byte) []byte {
	if !d.started {
		d.started = true
		b = d.r.Start(b, format.NewID("chatcmpl-"), d.model, format.Tokens{})
	}
	return b
}

func (d *bedrockDecoder) Frame(b []byte, event, data []byte) ([]byte, string, bool) {
	if ex, ok := bytes.CutPrefix(event, []byte("exception:")); ok {
		msg := gjson.GetBytes(data, "message").Str
		if msg == "" {
			msg = string(ex)
		}
		return d.r.Fail(d.begin(b), bedrockExceptionStatus(string(ex)), string(ex)+": "+msg), "", true
	}
	j := gjson.Parse(bytesView(data))
	var text string
	switch string(event) {
	case "messageStart":
		b = d.begin(b)
	case "contentBlockStart":
		b = d.begin(b)
		if tu := j.Get("start.toolUse"); tu.Exists() {
			b = d.r.ToolStart(b, strings.Clone(tu.Get("toolUseId").Str), strings.Clone(tu.Get("name").Str))
		}
	case "contentBlockDelta":
		b = d.begin(b)
		delta := j.Get("delta")
		if t := delta.Get("text"); t.Str != "" {
			text = strings.Clone(t.Str)
			b = d.r.Text(b, text)
		} else if in := delta.Get("toolUse.input"); in.Str != "" {
			b = d.r.ToolArgs(b, strings.Clone(in.Str))
		}
	case "messageStop":
		d.stopped = true
		d.stop = bedrockStop(j.Get("stopReason").Str)
	case "metadata":
		d.usage = bedrockUsage(j.Get("usage"))
		if d.stopped {
			return d.r.Finish(d.begin(b), d.stop, "", d.usage), "", true
		}
	}
	return b, text, false
}

func (d *bedrockDecoder) EOF(b []byte) ([]byte, error) {
	if !d.stopped {
		return b, format.ErrTruncated
	}
	return d.r.Finish(d.begin(b), d.stop, "", d.usage), nil
}

// bedrockExceptionStatus maps a Bedrock runtime exception to its HTTP status
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html#API_runtime_ConverseStream_Errors).
func bedrockExceptionStatus(typ string) int {
	switch typ {
	case "validationException":
		return 400
	case "throttlingException":
		return 429
	case "modelStreamErrorException":
		return 424
	case "serviceUnavailableException":
		return 503
	case "modelTimeoutException":
		return 408
	}
	return 500
}

// ---- Bedrock InvokeModel (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-embed.html) ----

// bedrockEmbed is InvokeModel (POST /model/{modelId}/invoke, SigV4-signed like Converse) with
// an embedding model: Amazon Titan Text Embeddings ({"inputText", "dimensions"?}, one input
// per call, answering {"embedding", "inputTextTokenCount"}) or Cohere Embed ({"texts",
// "input_type"}, up to 96 inputs per call, answering {"embeddings": [[...]]} or
// {"embeddings": {"float": [[...]]}}; the token count from the
// X-Amzn-Bedrock-Input-Token-Count header).
type bedrockEmbed struct {
	url    string
	cohere bool
}

const cohereEmbedBatch = 96

// bedrockEmbedder returns the embeddings API of a Bedrock model id, nil when it is not an
// embedding model (an optional cross-region prefix such as "us." is allowed).
func bedrockEmbedder(modelID, invokeURL string) provider.Embedder {
	switch {
	case strings.Contains(modelID, "amazon.titan-embed-text"):
		return bedrockEmbed{url: invokeURL}
	case strings.Contains(modelID, "cohere.embed"):
		return bedrockEmbed{url: invokeURL, cohere: true}
	}
	return nil
}

func (e bedrockEmbed) Calls(_ *provider.Deployment, r *provider.EmbedRequest) ([]provider.EmbedCall, error) {
	var calls []provider.EmbedCall
	if e.cohere {
		inputType := r.TaskType()
		if inputType == "" {
			inputType = "search_document"
		}
		for start := 0; start < len(r.Inputs()); start += cohereEmbedBatch {
			batch := r.Inputs()[start:min(start+cohereEmbedBatch, len(r.Inputs()))]
			b := []byte(`{"texts":`)
			b = format.AppendJSONStrings(b, batch)
			b = append(b, `,"input_type":`...)
			b = format.AppendJSONString(b, inputType)
			calls = append(calls, provider.EmbedCall{URL: e.url, Body: append(b, '}'), N: len(batch)})
		}
		return calls, nil
	}
	for _, t := range r.Inputs() {
		b := []byte(`{"inputText":`)
		b = format.AppendJSONString(b, t)
		if r.Dimensions() > 0 {
			b = append(b, `,"dimensions":`...)
			b = strconv.AppendInt(b, r.Dimensions(), 10)
		}
		calls = append(calls, provider.EmbedCall{URL: e.url, Body: append(b, '}'), N: 1})
	}
	return calls, nil
}

func (e bedrockEmbed) Parse(raw []byte, h http.Header) ([]string, int64, error) {
	j := gjson.ParseBytes(raw)
	tokens, _ := strconv.ParseInt(h.Get("X-Amzn-Bedrock-Input-Token-Count"), 10, 64)
	if !e.cohere {
		if n := j.Get("inputTextTokenCount"); n.Exists() {
			tokens = n.Int()
		}
		v, err := provider.VectorOf(j.Get("embedding"), "embedding")
		return []string{v}, tokens, err
	}
	embs := j.Get("embeddings")
	if embs.IsObject() {
		embs = embs.Get("float")
	}
	var out []string
	var err error
	embs.ForEach(func(_, e gjson.Result) bool {
		var v string
		v, err = provider.VectorOf(e, "embeddings[]")
		out = append(out, v)
		return err == nil
	})
	return out, tokens, err
}

// bytesView is b as a string without a copy, for gjson reads of a frame (valid until the
// frame's buffer is reused).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
