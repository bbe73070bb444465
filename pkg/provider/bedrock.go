package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/tidwall/gjson"
)

// Amazon Bedrock's Converse API (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html):
// POST {endpoint}/model/{modelId}/converse, and /converse-stream answered in the AWS
// event-stream framing (application/vnd.amazon.eventstream). Requests are signed with AWS
// Signature Version 4 (service "bedrock") by the AWS SDK for Go v2 signer. Mappings follow
// LiteLLM (litellm/llms/bedrock/chat/converse_transformation.py).
type bedrockAPI struct{}

var _ nativeAPI = bedrockAPI{}

// setupBedrock finishes a bedrock/<model-id> deployment (LiteLLM's bedrock provider):
//
//   - aws_region_name (env AWS_REGION, else AWS_DEFAULT_REGION; required) picks https://bedrock-runtime.{region}.amazonaws.com; api_base or
//     aws_bedrock_runtime_endpoint replaces it.
//   - Credentials: aws_access_key_id + aws_secret_access_key (+ aws_session_token), else the
//     AWS SDK's default chain (environment, shared config and credentials files with
//     aws_profile_name, web identity, ECS/EC2 roles), resolved on first use and cached until
//     they expire. A database object may use the chain only when allowed_env_secrets allows
//     AWS_SECRET_ACCESS_KEY (implicitChain).
//   - A "converse/" prefix on the model id (LiteLLM's route hint) is dropped.
func setupBedrock(d *Deployment, p gjson.Result) error {
	get := func(field, env string) (string, error) { return paramOrEnv(p, field, env) }
	region, err := get("aws_region_name", "AWS_REGION")
	if err != nil {
		return err
	}
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	keyID, err := get("aws_access_key_id", "")
	if err != nil {
		return err
	}
	secret, err := get("aws_secret_access_key", "")
	if err != nil {
		return err
	}
	session, err := get("aws_session_token", "")
	if err != nil {
		return err
	}
	profile, err := get("aws_profile_name", "")
	if err != nil {
		return err
	}
	endpoint, err := get("aws_bedrock_runtime_endpoint", "")
	if err != nil {
		return err
	}
	if (keyID == "") != (secret == "") {
		return errors.New("litellm_params.aws_access_key_id and aws_secret_access_key must be given together for provider \"bedrock\"")
	}
	bs := &bedrockSigner{signer: v4.NewSigner(), region: region}
	if keyID != "" {
		bs.creds = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(keyID, secret, session))
		d.extraSecrets = append(d.extraSecrets, secret, session)
	} else {
		bs.chain = &lazyValue[aws.CredentialsProvider]{find: func() (aws.CredentialsProvider, error) {
			opts := []func(*config.LoadOptions) error{}
			if profile != "" {
				opts = append(opts, config.WithSharedConfigProfile(profile))
			}
			cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
			if err != nil {
				return nil, err
			}
			if cfg.Credentials == nil {
				return nil, errors.New("no credential provider in the AWS configuration")
			}
			return cfg.Credentials, nil
		}}
	}
	if region == "" {
		if d.MockResponse == nil {
			return errors.New("litellm_params.aws_region_name (or AWS_REGION, AWS_DEFAULT_REGION) is required for provider \"bedrock\"")
		}
		return nil
	}
	if bs.chain != nil && d.MockResponse == nil {
		if err := d.implicitChain("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"); err != nil {
			return fmt.Errorf("%w (without aws_access_key_id and aws_secret_access_key the AWS default credential chain would be used)", err)
		}
	}
	base := endpoint
	if base == "" {
		base = d.APIBase
	}
	if base == "" {
		base = "https://bedrock-runtime." + region + ".amazonaws.com"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("litellm_params.aws_bedrock_runtime_endpoint: %q is not an http(s) URL", base)
	}
	d.APIBase = strings.TrimRight(base, "/")
	d.Model = strings.TrimPrefix(d.Model, "converse/")
	// The model id is one path segment with ":" escaped too, as the AWS SDKs send it
	// ("anthropic.claude-3-haiku-20240307-v1%3A0").
	prefix := d.APIBase + "/model/" + strings.ReplaceAll(url.PathEscape(d.Model), ":", "%3A")
	d.native = bedrockAPI{}
	d.embedder = bedrockEmbedder(d.Model, prefix+"/invoke")
	d.urls[formatNative] = prefix + "/converse"
	d.streamURL = prefix + "/converse-stream"
	h := d.header.Clone()
	h.Set("Accept", "application/json")
	for k, v := range d.ExtraHeaders {
		h.Set(k, v)
	}
	d.header = h
	d.signer = bs
	return nil
}

// bedrockSigner signs each request with SigV4 for service "bedrock".
type bedrockSigner struct {
	signer *v4.Signer
	region string
	creds  aws.CredentialsProvider             // static keys (a CredentialsCache); nil with the chain
	chain  *lazyValue[aws.CredentialsProvider] // the AWS default chain, loaded on first use
}

// sign signs req. Only successes are cached: the default chain's configuration is loaded
// again after a failed load (lazyValue), and its CredentialsCache keeps credentials until
// shortly before they expire and retrieves again after a failed retrieval.
func (b *bedrockSigner) sign(ctx context.Context, req *http.Request, body []byte) error {
	provider := b.creds
	if b.chain != nil {
		var err error
		if provider, err = b.chain.get(); err != nil {
			return &UpstreamError{Status: 401, Type: "authentication_error", Message: "bedrock: load AWS credentials: " + err.Error()}
		}
	}
	creds, err := provider.Retrieve(ctx)
	if err != nil {
		if credentialsUnavailable(err) {
			return &UpstreamError{Status: 502, Message: "bedrock: get AWS credentials: " + err.Error(), Retryable: true}
		}
		return &UpstreamError{Status: 401, Type: "authentication_error", Message: "bedrock: no AWS credentials: set aws_access_key_id/aws_secret_access_key or configure the AWS credential chain: " + err.Error()}
	}
	sum := sha256.Sum256(body)
	if err := b.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "bedrock", b.region, time.Now()); err != nil {
		return &UpstreamError{Status: 500, Message: "bedrock: sign request: " + err.Error()}
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
	ToolUseID string  `json:"toolUseId"`
	Name      string  `json:"name"`
	Input     rawJSON `json:"input"`
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

func (bedrockAPI) request(d *Deployment, r *request) ([]byte, error) {
	type toolSpec struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON rawJSON `json:"json"`
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
	}{Messages: make([]bedrockMessage, 0, len(r.messages))}
	for _, s := range r.system {
		body.System = append(body.System, map[string]string{"text": s})
	}
	for _, m := range r.messages {
		bm := bedrockMessage{Role: m.role}
		for _, p := range m.parts {
			switch p.kind {
			case partText:
				if p.text == "" {
					continue // Bedrock rejects blank text blocks
				}
				t := p.text
				bm.Content = append(bm.Content, bedrockBlock{Text: &t})
			case partImage:
				mt, data, ok := base64Image(p.url)
				if !ok {
					return nil, badRequest("messages: image URLs cannot be sent to provider %s; send the image as a base64 data: URL", d.Provider)
				}
				img := &bedrockImage{Format: strings.TrimPrefix(mt, "image/")}
				img.Source.Bytes = data
				bm.Content = append(bm.Content, bedrockBlock{Image: img})
			case partToolUse:
				bm.Content = append(bm.Content, bedrockBlock{ToolUse: &bedrockToolUse{ToolUseID: p.id, Name: p.name, Input: validObject(p.args)}})
			case partToolResult:
				tr := &bedrockToolResult{ToolUseID: p.id, Content: []map[string]string{{"text": p.text}}}
				if p.err {
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
	if r.maxTokens > 0 {
		ic["maxTokens"] = r.maxTokens
	}
	if r.temperature != "" {
		ic["temperature"] = rawJSON(r.temperature)
	}
	if r.topP != "" {
		ic["topP"] = rawJSON(r.topP)
	}
	if len(r.stop) > 0 {
		ic["stopSequences"] = r.stop
	}
	if len(ic) > 0 {
		body.InferenceConfig = ic
	}
	if r.topK != "" {
		body.Additional = map[string]any{"top_k": rawJSON(r.topK)}
	}
	if len(r.tools) > 0 {
		tc := &toolConfig{}
		for _, t := range r.tools {
			ts := toolSpec{Name: t.name, Description: t.description}
			ts.InputSchema.JSON = rawJSON(schemaOrEmpty(t.schema))
			tc.Tools = append(tc.Tools, tool{ToolSpec: ts})
		}
		switch r.choice.mode {
		case "auto":
			tc.ToolChoice = map[string]any{"auto": struct{}{}}
		case "any":
			tc.ToolChoice = map[string]any{"any": struct{}{}}
		case "tool":
			tc.ToolChoice = map[string]any{"tool": map[string]string{"name": r.choice.name}}
		}
		body.ToolConfig = tc
	}
	return marshal(body), nil
}

// bedrockStop maps Converse's stopReason.
func bedrockStop(s string) stopReason {
	switch s {
	case "max_tokens", "model_context_window_exceeded":
		return stopLength
	case "tool_use":
		return stopTool
	case "stop_sequence":
		return stopSequence
	case "guardrail_intervened", "content_filtered":
		return stopFilter
	}
	return stopEnd
}

// bedrockUsage reads Converse's usage: inputTokens excludes cache reads and writes, which
// are added (OpenAI counts every prompt token).
func bedrockUsage(u gjson.Result) usage {
	cr, cw := u.Get("cacheReadInputTokens").Int(), u.Get("cacheWriteInputTokens").Int()
	return usage{in: u.Get("inputTokens").Int() + cr + cw, out: u.Get("outputTokens").Int(), cacheRead: cr, cacheWrite: cw}
}

func (bedrockAPI) result(raw []byte) (*result, error) {
	if !validJSON(raw) {
		return nil, errBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	r := &result{id: newID("chatcmpl-")}
	j.Get("output.message.content").ForEach(func(_, c gjson.Result) bool {
		switch {
		case c.Get("text").Exists():
			r.blocks = append(r.blocks, block{text: c.Get("text").Str})
		case c.Get("toolUse").Exists():
			tu := c.Get("toolUse")
			r.blocks = append(r.blocks, block{tool: true, id: tu.Get("toolUseId").Str, name: tu.Get("name").Str, args: argsText(tu.Get("input"))})
		}
		return true
	})
	r.stop = bedrockStop(j.Get("stopReason").Str)
	r.usage = bedrockUsage(j.Get("usage"))
	return r, nil
}

func (bedrockAPI) frames(body io.Reader) frameReader {
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

func (e *eventStreamReader) next() error {
	msg, err := e.dec.Decode(e.r, e.buf[:0])
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return errTruncated
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

func (e *eventStreamReader) current() (raw, event, data []byte) { return e.data, e.event, e.data }

func (bedrockAPI) decoder(r renderer, model string) decoder {
	return &bedrockDecoder{r: r, model: model}
}

// bedrockDecoder reads ConverseStream events: messageStart, contentBlockStart (tool use),
// contentBlockDelta (text or tool input JSON), contentBlockStop, messageStop (stopReason),
// metadata (usage; the last event).
type bedrockDecoder struct {
	r       renderer
	model   string
	started bool
	stopped bool
	stop    stopReason
	usage   usage
}

func (d *bedrockDecoder) begin(b []byte) []byte {
	if !d.started {
		d.started = true
		b = d.r.start(b, newID("chatcmpl-"), d.model, usage{})
	}
	return b
}

func (d *bedrockDecoder) frame(b []byte, event, data []byte) ([]byte, string, bool) {
	if ex, ok := bytes.CutPrefix(event, []byte("exception:")); ok {
		msg := gjson.GetBytes(data, "message").Str
		if msg == "" {
			msg = string(ex)
		}
		return d.r.fail(d.begin(b), bedrockExceptionStatus(string(ex)), string(ex)+": "+msg), "", true
	}
	j := gjson.Parse(bytesView(data))
	var text string
	switch string(event) {
	case "messageStart":
		b = d.begin(b)
	case "contentBlockStart":
		b = d.begin(b)
		if tu := j.Get("start.toolUse"); tu.Exists() {
			b = d.r.toolStart(b, strings.Clone(tu.Get("toolUseId").Str), strings.Clone(tu.Get("name").Str))
		}
	case "contentBlockDelta":
		b = d.begin(b)
		delta := j.Get("delta")
		if t := delta.Get("text"); t.Str != "" {
			text = strings.Clone(t.Str)
			b = d.r.text(b, text)
		} else if in := delta.Get("toolUse.input"); in.Str != "" {
			b = d.r.toolArgs(b, strings.Clone(in.Str))
		}
	case "messageStop":
		d.stopped = true
		d.stop = bedrockStop(j.Get("stopReason").Str)
	case "metadata":
		d.usage = bedrockUsage(j.Get("usage"))
		if d.stopped {
			return d.r.finish(d.begin(b), d.stop, "", d.usage), "", true
		}
	}
	return b, text, false
}

func (d *bedrockDecoder) eof(b []byte) ([]byte, error) {
	if !d.stopped {
		return b, errTruncated
	}
	return d.r.finish(d.begin(b), d.stop, "", d.usage), nil
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
