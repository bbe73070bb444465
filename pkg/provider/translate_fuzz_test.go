package provider

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

// Any body, any pair: a translation is a body that parses, or a 400 — never a panic.
func FuzzTranslateRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"g","messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JV"}}]}],"thinking":{"type":"enabled","budget_tokens":1}}`,
		`{"model":"g","input":[{"type":"function_call","namespace":"n","name":"a","arguments":"{}"}],"tools":[{"type":"namespace","name":"n","tools":[{"type":"namespace","name":"m","tools":[]}]},{"type":"web_search","user_location":{"country":1}}],"text":{"format":{"type":"json_object"}}}`,
		`{"model":"g","messages":[{"role":"assistant","thinking_blocks":[{"type":"thinking","signature":"s"}],"tool_calls":[{"function":{}}]}],"response_format":{"type":"json_schema"},"reasoning_effort":"high","max_tokens":2,"stop":[" "],"user":"a@b"}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	models := []string{"anthropic/claude-sonnet-4-5", "anthropic/claude-3-haiku", "groq/m", "gemini/gemini-2.5-pro", "ollama/llama3", "bedrock/anthropic.claude-3-haiku-20240307-v1:0"}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		in := []format.Format{format.FormatChat, format.FormatResponses, format.FormatMessages}[int(sel)%3]
		model := models[int(sel/3)%len(models)]
		d, err := NewDeployment("id", "g", []byte(`{"model":"`+model+`","api_key":"k","api_base":"http://127.0.0.1:1","aws_region_name":"us-east-1","aws_access_key_id":"AKIDEXAMPLE","aws_secret_access_key":"secret0123456789"}`))
		if err != nil {
			t.Fatal(err)
		}
		up, pass, err := plan(d, in)
		if err != nil || pass {
			return
		}
		b, _, err := upstreamBody(d, in, up, pass, false, body)
		if err != nil {
			var ue *format.RequestError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, 400, ue.Status())
			return
		}
		require.True(t, json.Valid(b), "%s → %s", body, b)
	})
}
