package guardrail

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func compile(t *testing.T, params string) *Guardrail {
	t.Helper()
	g, err := Compile("test-guard", []byte(params))
	require.NoError(t, err)
	return g
}

func TestCompileModes(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		params string
		want   []Mode
	}{
		{"default", `{"guardrail": "litellm_content_filter"}`, []Mode{PreCall}},
		{"null", `{"guardrail": "litellm_content_filter", "mode": null}`, []Mode{PreCall}},
		{"string pre_call", `{"guardrail": "litellm_content_filter", "mode": "pre_call"}`, []Mode{PreCall}},
		{"string post_call", `{"guardrail": "litellm_content_filter", "mode": "post_call"}`, []Mode{PostCall}},
		{"string during_call", `{"guardrail": "litellm_content_filter", "mode": "during_call"}`, []Mode{DuringCall}},
		{"array", `{"guardrail": "litellm_content_filter", "mode": ["pre_call", "post_call"]}`, []Mode{PreCall, PostCall}},
		{"array deduplicated", `{"guardrail": "litellm_content_filter", "mode": ["post_call", "during_call", "post_call"]}`, []Mode{PostCall, DuringCall}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := compile(t, tt.params)
			require.Equal(t, tt.want, g.Modes)
			for _, m := range allModes {
				require.Equal(t, slices.Contains(tt.want, m), g.Runs(m), m)
			}
		})
	}
}

func TestCompileFields(t *testing.T) {
	t.Parallel()

	g, err := Compile("pii", []byte(`{
		"guardrail": "litellm_content_filter",
		"mode": "post_call",
		"default_on": true,
		"pattern_redaction_format": "<{pattern_name}>",
		"keyword_redaction_tag": "***",
		"blocked_words": [{"keyword": "Secret", "action": "mask", "description": "internal"}],
		"patterns": [{"pattern_type": "prebuilt", "pattern_name": "email", "action": "Mask"}],
		"blocked_words_file": null,
		"categories": [],
		"guardrail_info": {"owner": "x"},
		"api_key": null,
		"unknown_extra": [1, 2, 3]
	}`))
	require.NoError(t, err)
	require.Equal(t, "pii", g.Name)
	require.True(t, g.DefaultOn)
	require.Equal(t, []Mode{PostCall}, g.Modes)

	out, err := g.Check("my secret is a@b.io")
	require.NoError(t, err)
	require.Equal(t, "my *** is <EMAIL>", out)

	// Empty formats fall back to the defaults, like LiteLLM's `or` defaults.
	g = compile(t, `{"guardrail": "litellm_content_filter", "pattern_redaction_format": "", "keyword_redaction_tag": "",
		"blocked_words": [{"keyword": "secret", "action": "MASK"}],
		"patterns": [{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"}]}`)
	out, err = g.Check("secret a@b.io")
	require.NoError(t, err)
	require.Equal(t, "[KEYWORD_REDACTED] [EMAIL_REDACTED]", out)
	require.False(t, g.DefaultOn)
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()

	const gt = `"guardrail": "litellm_content_filter"`
	tests := []struct {
		name   string
		params string
		want   string
	}{
		{"not json", `{`, "litellm_params: must be a JSON object: unexpected end of JSON input"},
		{"array", `[]`, "litellm_params: must be a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"null", `null`, "litellm_params: must be a JSON object"},
		{"guardrail missing", `{}`, "guardrail: required (supported: litellm_content_filter)"},
		{"guardrail unsupported", `{"guardrail": "foo"}`, `guardrail: unsupported guardrail type "foo" (supported: litellm_content_filter)`},
		{"guardrail not string", `{"guardrail": 7}`, "guardrail: must be a string, got number"},

		{"mode unknown", `{` + gt + `, "mode": "logging_only"}`, `mode: unsupported mode "logging_only" (supported: pre_call, post_call, during_call)`},
		{"mode empty string", `{` + gt + `, "mode": ""}`, `mode: unsupported mode "" (supported: pre_call, post_call, during_call)`},
		{"mode number", `{` + gt + `, "mode": 1}`, "mode: must be a string or an array of strings, got number"},
		{"mode empty array", `{` + gt + `, "mode": []}`, "mode: must name at least one of pre_call, post_call, during_call"},
		{"mode item unknown", `{` + gt + `, "mode": ["pre_call", "PRE_CALL"]}`, `mode[1]: unsupported mode "PRE_CALL" (supported: pre_call, post_call, during_call)`},
		{"mode item not string", `{` + gt + `, "mode": [null]}`, "mode[0]: must be a string, got null"},

		{"default_on not bool", `{` + gt + `, "default_on": "yes"}`, "default_on: must be a boolean, got string"},
		{"pattern_redaction_format not string", `{` + gt + `, "pattern_redaction_format": 1}`, "pattern_redaction_format: must be a string, got number"},
		{"keyword_redaction_tag not string", `{` + gt + `, "keyword_redaction_tag": []}`, "keyword_redaction_tag: must be a string, got array"},
		{"blocked_words_file", `{` + gt + `, "blocked_words_file": "/etc/words.yaml"}`, "blocked_words_file: not supported; list the words inline in blocked_words"},
		{"categories", `{` + gt + `, "categories": [{"category": "harmful_self_harm"}]}`, "categories: not supported; use blocked_words and patterns"},

		{"patterns not array", `{` + gt + `, "patterns": {}}`, "patterns: must be an array of objects, got object"},
		{"pattern not object", `{` + gt + `, "patterns": ["email"]}`, "patterns[0]: must be an object, got string"},
		{"pattern member not string", `{` + gt + `, "patterns": [{"pattern_type": "regex", "pattern": "x", "name": 5, "action": "MASK"}]}`, "patterns[0].name: must be a string, got number"},
		{"pattern action missing", `{` + gt + `, "patterns": [{"pattern_type": "prebuilt", "pattern_name": "email"}]}`, "patterns[0].action: required (BLOCK or MASK)"},
		{"pattern action invalid", `{` + gt + `, "patterns": [{"pattern_type": "prebuilt", "pattern_name": "email", "action": "DROP"}]}`, `patterns[0].action: must be BLOCK or MASK, got "DROP"`},
		{"pattern_type missing", `{` + gt + `, "patterns": [{"pattern_name": "email", "action": "MASK"}]}`, `patterns[0].pattern_type: required ("prebuilt" or "regex")`},
		{"pattern_type invalid", `{` + gt + `, "patterns": [{"pattern_type": "builtin", "pattern_name": "email", "action": "MASK"}]}`, `patterns[0].pattern_type: must be "prebuilt" or "regex", got "builtin"`},
		{"pattern_name missing", `{` + gt + `, "patterns": [{"pattern_type": "prebuilt", "action": "MASK"}]}`,
			`patterns[0].pattern_name: required for pattern_type "prebuilt" (known: amex, aws_access_key, credit_card, discover, email, generic_api_key, github_token, ipv4, mastercard, slack_token, url, us_phone, us_ssn, us_ssn_no_dash, visa)`},
		{"pattern_name unknown", `{` + gt + `, "patterns": [
			{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"},
			{"pattern_type": "prebuilt", "pattern_name": "passport_xx", "action": "MASK"}]}`,
			`patterns[1].pattern_name: unknown prebuilt pattern "passport_xx" (known: amex, aws_access_key, credit_card, discover, email, generic_api_key, github_token, ipv4, mastercard, slack_token, url, us_phone, us_ssn, us_ssn_no_dash, visa)`},
		{"regex pattern missing", `{` + gt + `, "patterns": [{"pattern_type": "regex", "name": "x", "action": "MASK"}]}`, `patterns[0].pattern: required for pattern_type "regex"`},
		{"regex invalid", `{` + gt + `, "patterns": [
			{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"},
			{"pattern_type": "prebuilt", "pattern_name": "ipv4", "action": "MASK"},
			{"pattern_type": "regex", "pattern": "(", "action": "MASK"}]}`, `patterns[2].pattern: invalid regex "(": missing closing )`},
		{"regex lookahead", `{` + gt + `, "patterns": [{"pattern_type": "regex", "pattern": "a(?!b)", "action": "BLOCK"}]}`,
			`patterns[0].pattern: invalid regex "a(?!b)": invalid or unsupported Perl syntax: "(?!"`},

		{"blocked_words not array", `{` + gt + `, "blocked_words": "secret"}`, "blocked_words: must be an array of objects, got string"},
		{"blocked word not object", `{` + gt + `, "blocked_words": [["secret"]]}`, "blocked_words[0]: must be an object, got array"},
		{"keyword missing", `{` + gt + `, "blocked_words": [{"action": "BLOCK"}]}`, "blocked_words[0].keyword: required"},
		{"keyword blank", `{` + gt + `, "blocked_words": [{"keyword": "  ", "action": "BLOCK"}]}`, "blocked_words[0].keyword: must not be blank"},
		{"keyword not string", `{` + gt + `, "blocked_words": [{"keyword": 12, "action": "BLOCK"}]}`, "blocked_words[0].keyword: must be a string, got number"},
		{"keyword only wildcards", `{` + gt + `, "blocked_words": [{"keyword": "ok", "action": "BLOCK"}, {"keyword": "**", "action": "BLOCK"}]}`,
			"blocked_words[1].keyword: must contain at least one character other than the wildcard '*'"},
		{"keyword action missing", `{` + gt + `, "blocked_words": [{"keyword": "secret"}]}`, "blocked_words[0].action: required (BLOCK or MASK)"},
		{"keyword action invalid", `{` + gt + `, "blocked_words": [{"keyword": "secret", "action": "DROP"}]}`, `blocked_words[0].action: must be BLOCK or MASK, got "DROP"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := Compile("bad", []byte(tt.params))
			require.Nil(t, g)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestConfigErrorWithoutField(t *testing.T) {
	t.Parallel()
	require.EqualError(t, &ConfigError{Message: "bad"}, "bad")
}

func TestPrebuiltPatterns(t *testing.T) {
	t.Parallel()
	names := PrebuiltPatterns()
	for _, want := range []string{"email", "us_ssn", "us_phone", "credit_card", "ipv4", "aws_access_key", "github_token"} {
		require.Contains(t, names, want)
	}
	require.IsIncreasing(t, names)
}
