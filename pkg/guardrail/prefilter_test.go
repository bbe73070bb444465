package guardrail

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRegexLiterals(t *testing.T) {
	t.Parallel()

	tests := []struct {
		expr string
		want []string
	}{
		{`(?i)\bEMP-\d{6}\b`, []string{"EMP-"}},
		{`(?i)foo|barbaz`, []string{"foo", "barbaz"}},
		{`(?i)(?:https?://|www\.)x`, []string{"http", "www."}},
		{`(?i)[Aa][Pp][Ii]_?keys`, []string{"keys"}},
		{`(?i)[Aa][Pp][Ii]-key`, []string{"API-key"}},
		{`(?i)\d+-(abc)+`, []string{"abc"}},
		{`(?i)x{2,5}y`, []string{"xx"}},
		{`(?i)\d+`, nil},
		{`(?i)foo|\d`, nil},
		{`(?i)(?:abc)?\d`, nil},
		{`(?i)[ab]c`, []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			got := regexLiterals(regexp.MustCompile(tt.expr))
			if tt.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, strings.ToLower(strings.Join(tt.want, "|")), strings.ToLower(strings.Join(got, "|")))
		})
	}
	for _, name := range []string{"slack_token", "generic_api_key", "url"} {
		require.NotEmpty(t, regexLiterals(prebuiltByName[name].re.re), name)
	}
}

// TestRegexPrefilterAgreesWithRegexp checks that the prefilter never hides a match: for each
// regex, Check masks exactly what regexp.ReplaceAllString replaces.
func TestRegexPrefilterAgreesWithRegexp(t *testing.T) {
	t.Parallel()

	exprs := []string{`\bEMP-\d{6}\b`, `foo|bar\d`, `(?-i)CaseSensitive`, `ſun|KELVIN`, `(?:https?://|www\.)\S+`, `[Ss][Ee][Cc]`}
	texts := []string{
		"", "emp-123456", "EMP-123456 and Emp-654321x", "FOO bar1 Bar2 bar", "casesensitive CaseSensitive",
		"SUN sun \u212Aelvin kelvin", "see HTTPS://x.io and www.y.org", "sec SEC ſec", "nothing at all",
	}
	for i, expr := range exprs {
		params := fmt.Sprintf(`{"guardrail": "litellm_content_filter", "patterns": [
			{"pattern_type": "regex", "pattern": %q, "name": "r", "action": "MASK"}]}`, expr)
		g := compile(t, params)
		require.NotZero(t, g.patterns[0].prefBit, expr)
		re := regexp.MustCompile("(?i)" + expr)
		for _, text := range texts {
			got, err := g.Check(text)
			require.NoError(t, err)
			require.Equal(t, re.ReplaceAllLiteralString(text, "[R_REDACTED]"), got, "expr %d %q text %q", i, expr, text)
		}
	}
}

// TestManyRegexPrefilters covers more prefiltered regexes than bits in the mask.
func TestManyRegexPrefilters(t *testing.T) {
	t.Parallel()
	var ps []string
	for i := range 70 {
		ps = append(ps, fmt.Sprintf(`{"pattern_type": "regex", "pattern": "tag%02d-\\d+", "name": "t%02d", "action": "MASK"}`, i, i))
	}
	g := compile(t, `{"guardrail": "litellm_content_filter", "patterns": [`+strings.Join(ps, ",")+`]}`)
	out, err := g.Check("tag00-1 tag62-2 tag63-3 tag69-4 tag70-5")
	require.NoError(t, err)
	require.Equal(t, "[T00_REDACTED] [T62_REDACTED] [T63_REDACTED] [T69_REDACTED] tag70-5", out)
}
