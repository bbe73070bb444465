package bedrock

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// AnthropicVersion is the anthropic_version Claude on Bedrock InvokeModel requires in the body
// (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html;
// LiteLLM's DEFAULT_BEDROCK_ANTHROPIC_API_VERSION).
const AnthropicVersion = "bedrock-2023-05-31"

// isClaude reports whether a Bedrock model id is an Anthropic Claude model, with or without a
// cross-region inference prefix ("anthropic.claude-…", "us.anthropic.claude-…", or an
// inference-profile ARN naming one), as LiteLLM's get_bedrock_invoke_provider finds
// "anthropic".
func isClaude(modelID string) bool { return strings.Contains(modelID, "anthropic.claude") }

// invokeMessages is InvokeModel with Claude: POST /model/{modelId}/invoke and
// /invoke-with-response-stream, the body Anthropic's Messages request (LiteLLM's
// AmazonAnthropicClaudeMessagesConfig, litellm/llms/bedrock/messages/invoke_transformations/
// anthropic_claude3_transformation.py): no "model" (it is in the URL) and no "stream" (the
// endpoint says it), "anthropic_version": "bedrock-2023-05-31" unless the client gave one, and
// the client's anthropic-beta header as the "anthropic_beta" array (Bedrock reads beta
// features from the body, not a header), and top-level members Bedrock does not accept
// removed, named in x-lockstep-dropped (LiteLLM's BedrockInvokeAnthropicMessagesRequest
// allowlist: invokeFields). Everything else passes through unchanged. The
// answer is Anthropic's Messages JSON; the stream is the AWS event-stream framing whose
// "chunk" events carry {"bytes": base64 of one Anthropic stream event's JSON}.
type invokeMessages struct{}

var _ provider.MessagesWire = invokeMessages{}

// invokeFields are the top-level members Bedrock InvokeModel takes with Claude (LiteLLM's
// BedrockInvokeAnthropicMessagesRequest; "model" and "stream" are removed without a note:
// the URL carries them).
var invokeFields = map[string]bool{"anthropic_version": true, "max_tokens": true, "messages": true, "anthropic_beta": true,
	"system": true, "stop_sequences": true, "temperature": true, "top_p": true, "top_k": true, "tools": true,
	"tool_choice": true, "thinking": true, "metadata": true, "output_config": true, "context_management": true}

func (invokeMessages) Body(b []byte, _ bool, in http.Header) ([]byte, []string, error) {
	if urlImage(b) {
		// Claude on Bedrock takes base64 image sources only (the Converse translation's
		// refusal, in the same words)
		return nil, nil, format.BadRequest("messages: image URLs cannot be sent to provider bedrock; send the image as a base64 data: URL")
	}
	var del, dropped []string
	gjson.ParseBytes(b).ForEach(func(k, _ gjson.Result) bool {
		switch {
		case k.Str == "model" || k.Str == "stream":
			del = append(del, k.Str)
		case !invokeFields[k.Str]:
			del, dropped = append(del, k.Str), append(dropped, k.Str)
		}
		return true
	})
	var err error
	for _, k := range del {
		if b, err = sjson.DeleteBytes(b, gjson.Escape(k)); err != nil {
			return nil, nil, format.BadRequest("%v", err)
		}
	}
	if !gjson.GetBytes(b, "anthropic_version").Exists() {
		if b, err = sjson.SetBytes(b, "anthropic_version", AnthropicVersion); err != nil {
			return nil, nil, format.BadRequest("%v", err)
		}
	}
	if betas := betaList(in); len(betas) > 0 && !gjson.GetBytes(b, "anthropic_beta").Exists() {
		if b, err = sjson.SetBytes(b, "anthropic_beta", betas); err != nil {
			return nil, nil, format.BadRequest("%v", err)
		}
	}
	return b, dropped, nil
}

// urlImage reports an image block with a "url" source in a Messages body's messages (also
// inside tool results).
func urlImage(b []byte) bool {
	if !strings.Contains(bytesView(b), `"url"`) {
		return false // hot path: no such source, the body is not walked
	}
	found := false
	var walk func(c gjson.Result) bool
	walk = func(c gjson.Result) bool {
		if c.Get("type").Str == "image" && c.Get("source.type").Str == "url" {
			found = true
			return false
		}
		if inner := c.Get("content"); inner.IsArray() {
			inner.ForEach(func(_, x gjson.Result) bool { return walk(x) })
		}
		return !found
	}
	gjson.GetBytes(b, "messages").ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, c gjson.Result) bool { return walk(c) })
		return !found
	})
	return found
}

// betaList splits the anthropic-beta header values ("a,b" or repeated headers) into names.
func betaList(h http.Header) []string {
	var out []string
	for _, v := range h.Values("anthropic-beta") {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

func (invokeMessages) Frames(body io.Reader) provider.FrameReader {
	return &chunkReader{es: eventStreamReader{r: body, dec: eventstream.NewDecoder()}}
}

// chunkReader turns InvokeModelWithResponseStream's event-stream messages into the Anthropic
// SSE frames they carry: a "chunk" event's bytes (base64) are one event's JSON, framed as
// "event: <its type>\ndata: <json>\n\n". Other events are skipped; an exception message
// (modelStreamErrorException, throttlingException, …) ends the stream with its status.
type chunkReader struct {
	es    eventStreamReader
	json  []byte
	raw   []byte
	event []byte
}

func (c *chunkReader) Next() error {
	for {
		if err := c.es.Next(); err != nil {
			return err
		}
		_, event, data := c.es.Current()
		if ex, ok := strings.CutPrefix(string(event), "exception:"); ok {
			msg := gjson.GetBytes(data, "message").Str
			if msg == "" {
				msg = ex
			}
			return &format.UpstreamError{Status: bedrockExceptionStatus(ex), Message: ex + ": " + msg, Retryable: bedrockExceptionStatus(ex) >= 500}
		}
		if string(event) != "chunk" {
			continue
		}
		b64 := gjson.GetBytes(data, "bytes").Str
		n := base64.StdEncoding.DecodedLen(len(b64))
		if cap(c.json) < n {
			c.json = make([]byte, n)
		}
		n, err := base64.StdEncoding.Decode(c.json[:n], []byte(b64))
		if err != nil || !gjson.ValidBytes(c.json[:n]) {
			return &format.UpstreamError{Status: 502, Message: "bedrock: malformed stream chunk", Retryable: true}
		}
		c.json = c.json[:n]
		typ := gjson.GetBytes(c.json, "type").Str
		c.event = append(c.event[:0], typ...)
		c.raw = append(append(append(append(append(c.raw[:0], "event: "...), typ...), "\ndata: "...), c.json...), "\n\n"...)
		return nil
	}
}

func (c *chunkReader) Current() (raw, event, data []byte) { return c.raw, c.event, c.json }
