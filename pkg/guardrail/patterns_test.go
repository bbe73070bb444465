package guardrail

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func maskPattern(t *testing.T, name string) *Guardrail {
	t.Helper()
	return compile(t, fmt.Sprintf(`{"guardrail": "litellm_content_filter",
		"patterns": [{"pattern_type": "prebuilt", "pattern_name": %q, "action": "MASK"}]}`, name))
}

const (
	tok36 = "iK2ZWeqhFWCEPyYngFb51yBMWXaSCrUZoL8g"
	pat82 = "5ubbbPIa84yRnBUbHoWC8F_JowoRoWD8s7bA16J7PglOU3shVv5UTG79BG16QmtsL4F28GzL2cEpVZzAQl"
)

// TestPrebuiltPatterns lists, per prebuilt pattern, texts with the expected masked output; a
// near miss expects the text unchanged.
func TestPrebuiltPatternMatches(t *testing.T) {
	t.Parallel()

	type tc struct{ in, want string }
	same := func(s string) tc { return tc{s, s} }
	tests := map[string][]tc{
		"email": {
			{"contact john.doe@example.com today", "contact [EMAIL_REDACTED] today"},
			{"a.b+tag@sub.example.co.uk.", "[EMAIL_REDACTED]."},
			{"MAIL: JOHN_O'x@EXAMPLE.COM", "MAIL: JOHN_O'[EMAIL_REDACTED]"},
			{"a@b.io, c%d@e-f.org;", "[EMAIL_REDACTED], [EMAIL_REDACTED];"},
			{"a@b.com.x@y.org", "[EMAIL_REDACTED][EMAIL_REDACTED]"},
			{"a@b@c.com", "a@[EMAIL_REDACTED]"},
			{" .john@x.com", " .[EMAIL_REDACTED]"},
			{"📧john@example.com👍", "📧[EMAIL_REDACTED]👍"},
			{"пишите на ivan@example.ru, спасибо", "пишите на [EMAIL_REDACTED], спасибо"},
			{"user@example.com.", "[EMAIL_REDACTED]."},
			{"x@a.b.c.de-1", "[EMAIL_REDACTED]-1"},
			same("john@localhost"),
			same("john@example.c"),
			same("john@example.c0m"),
			same("@example.com"),
			same("john@.com"),
			same("a@b.com_x"),
			same("иван@пример.рф"),
			// Python's \b: no boundary between 'ß' and 'e', as in LiteLLM.
			same("Straßeuser@example.com"),
		},
		"us_ssn": {
			{"SSN 123-45-6789.", "SSN [US_SSN_REDACTED]."},
			{"123 45 6789", "[US_SSN_REDACTED]"},
			{"(078-05-1120)", "([US_SSN_REDACTED])"},
			{"номер 123-45-6789 ✓", "номер [US_SSN_REDACTED] ✓"},
			{"123-45-6789-1", "[US_SSN_REDACTED]-1"},
			same("000-12-3456"),
			same("666-12-3456"),
			same("900-12-3456"),
			same("999-99-9999"),
			same("123-00-4567"),
			same("123-45-0000"),
			same("123-45 6789"),
			same("1123-45-6789"),
			same("123-45-67890"),
			same("a123-45-6789"),
			same("ИНН123-45-6789"),
			same("123456789"),
			same("12-345-6789"),
		},
		"us_ssn_no_dash": {
			{"ssn=123456789;", "ssn=[US_SSN_NO_DASH_REDACTED];"},
			same("1234567890"),
			same("000123456"),
			same("666123456"),
			same("912345678"),
			same("123001234"),
			same("123450000"),
		},
		"us_phone": {
			{"call 555-123-4567 now", "call [US_PHONE_REDACTED] now"},
			{"(555) 123-4567", "[US_PHONE_REDACTED]"},
			{"+1 (555) 123-4567", "[US_PHONE_REDACTED]"},
			{"+1-555-123-4567", "[US_PHONE_REDACTED]"},
			{"1-800-555-1234", "[US_PHONE_REDACTED]"},
			{"tel:555.123.4567", "tel:[US_PHONE_REDACTED]"},
			{"5551234567", "[US_PHONE_REDACTED]"},
			{"15551234567", "[US_PHONE_REDACTED]"},
			{"☎️ 555 123 4567 ☎️", "☎️ [US_PHONE_REDACTED] ☎️"},
			same("555-1234"),
			same("555-123-456"),
			same("555-123-45678"),
			same("x5551234567"),
			same("555--123-4567"),
			same("+44 20 7946 0958"),
			same("+2 555 123 4567x"),
		},
		"credit_card": {
			{"visa 4111 1111 1111 1111.", "visa [CREDIT_CARD_REDACTED]."},
			{"4111-1111-1111-1111", "[CREDIT_CARD_REDACTED]"},
			{"4111111111111111", "[CREDIT_CARD_REDACTED]"},
			{"4111 1111-11111111", "[CREDIT_CARD_REDACTED]"},
			{"mc 5555555555554444", "mc [CREDIT_CARD_REDACTED]"},
			{"5105 1051 0510 5100", "[CREDIT_CARD_REDACTED]"},
			{"2221000000000009", "[CREDIT_CARD_REDACTED]"},
			{"2720-9999-9999-9996", "[CREDIT_CARD_REDACTED]"},
			{"amex 3782 822463 10005", "amex [CREDIT_CARD_REDACTED]"},
			{"378282246310005", "[CREDIT_CARD_REDACTED]"},
			{"6011111111111117", "[CREDIT_CARD_REDACTED]"},
			{"6500000000000002", "[CREDIT_CARD_REDACTED]"},
			{"6445644564456445", "[CREDIT_CARD_REDACTED]"},
			{"カード: 4111 1111 1111 1111。", "カード: [CREDIT_CARD_REDACTED]。"},
			{"№4012888888881881", "№[CREDIT_CARD_REDACTED]"},
			same("4111111111111112"),    // Luhn
			same("4111 1111 1111 1112"), // Luhn
			same("2721000000000004"),    // Luhn ok, not a Mastercard range
			same("1234567812345670"),    // Luhn ok, no brand
			same("411111111111111"),     // 15 digits
			same("41111111111111111"),   // 17 digits
			same("3782822463100051"),    // amex prefix, 16 digits
			same("4111 1111 1111 111"),
			same("4111  1111 1111 1111"),
			same("card4111111111111111"),
		},
		"visa":       {{"4111111111111111 5555555555554444", "[VISA_REDACTED] 5555555555554444"}},
		"mastercard": {{"4111111111111111 5555555555554444", "4111111111111111 [MASTERCARD_REDACTED]"}},
		"amex":       {{"378282246310005 6011111111111117", "[AMEX_REDACTED] 6011111111111117"}},
		"discover":   {{"378282246310005 6011111111111117", "378282246310005 [DISCOVER_REDACTED]"}},
		"ipv4": {
			{"server 192.168.1.1 down", "server [IPV4_REDACTED] down"},
			{"10.0.0.255,0.0.0.0", "[IPV4_REDACTED],[IPV4_REDACTED]"},
			{"1.2.3.4.5", "[IPV4_REDACTED].5"},
			{"999.1.2.3.4", "999.[IPV4_REDACTED]"},
			{"ip=255.255.255.255", "ip=[IPV4_REDACTED]"},
			{"адрес 8.8.8.8 🙂", "адрес [IPV4_REDACTED] 🙂"},
			same("256.1.1.1"),
			same("1.2.3"),
			same("1.2.3.1000"),
			same("192.168.1.300"),
			same("1.2.3.4a"),
			same("v1.2.3.4"),
			same("1..2.3.4"),
		},
		"aws_access_key": {
			{"key AKIAIOSFODNN7EXAMPLE end", "key [AWS_ACCESS_KEY_REDACTED] end"},
			{"ASIAY34FZKBOKMUTVV7A", "[AWS_ACCESS_KEY_REDACTED]"},
			{`"AKIAIOSFODNN7EXAMPLE"`, `"[AWS_ACCESS_KEY_REDACTED]"`},
			same("AKIAIOSFODNN7EXAMPL"),
			same("AKIAIOSFODNN7EXAMPLEX"),
			same("akiaiosfodnn7example"),
			same("AKIDIOSFODNN7EXAMPLE"),
			same("xAKIAIOSFODNN7EXAMPLE"),
			same("AKIAIOSFODNN7EXAMPLe"),
		},
		"github_token": {
			{"token ghp_" + tok36 + " ok", "token [GITHUB_TOKEN_REDACTED] ok"},
			{"gho_" + tok36, "[GITHUB_TOKEN_REDACTED]"},
			{"ghu_" + tok36, "[GITHUB_TOKEN_REDACTED]"},
			{"ghs_" + tok36, "[GITHUB_TOKEN_REDACTED]"},
			{"ghr_" + tok36 + ".", "[GITHUB_TOKEN_REDACTED]."},
			{"github_pat_" + pat82, "[GITHUB_TOKEN_REDACTED]"},
			same("ghx_" + tok36),
			same("ghp_" + tok36[1:]),
			same("ghp_" + tok36 + "x"),
			same("ghp_" + tok36[:20] + "-" + tok36[21:]),
			same("xghp_" + tok36),
			same("GHP_" + tok36),
			same("github_pat_" + pat82[1:]),
			same("github_pat_" + pat82 + "x"),
		},
		"slack_token": {
			{"xoxb-1234567890-1234567890-abcdefghijklmnopqrstuvwx", "[SLACK_TOKEN_REDACTED]"},
			same("xoxz-1234567890-1234567890-abcdefghijklmnopqrstuvwx"),
		},
		"generic_api_key": {
			{"api_key = 'abcdefghijklmnopqrstuvwxyz'", "[GENERIC_API_KEY_REDACTED]'"},
			same("api_key = short"),
		},
		"url": {
			{"see https://example.com/a?b=c now", "see [URL_REDACTED] now"},
			same("see example.com"),
		},
	}
	require.ElementsMatch(t, PrebuiltPatterns(), keys(tests), "every prebuilt pattern has cases")
	for name, cases := range tests {
		g := maskPattern(t, name)
		for _, c := range cases {
			t.Run(name+"/"+c.in, func(t *testing.T) {
				t.Parallel()
				got, err := g.Check(c.in)
				require.NoError(t, err)
				require.Equal(t, c.want, got)
			})
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPrebuiltBlock(t *testing.T) {
	t.Parallel()
	g := compile(t, `{"guardrail": "litellm_content_filter", "patterns": [
		{"pattern_type": "prebuilt", "pattern_name": "us_ssn", "action": "block"}]}`)
	_, err := g.Check("my ssn is 123-45-6789")
	var be *BlockedError
	require.ErrorAs(t, err, &be)
	require.EqualError(t, err, "Content blocked: us_ssn pattern detected")
	require.Equal(t, &BlockedError{Guardrail: "test-guard", Message: "Content blocked: us_ssn pattern detected", Pattern: "us_ssn"}, be)

	out, err := g.Check("my ssn is 666-45-6789")
	require.NoError(t, err)
	require.Equal(t, "my ssn is 666-45-6789", out)
}

func TestCustomRegex(t *testing.T) {
	t.Parallel()

	g := compile(t, `{"guardrail": "litellm_content_filter", "patterns": [
		{"pattern_type": "regex", "pattern": "\\bEMP-\\d{6}\\b", "name": "employee_id", "action": "MASK"},
		{"pattern_type": "regex", "pattern": "(?-i)Project[A-Z]+", "action": "MASK"},
		{"pattern_type": "regex", "pattern": "x*", "name": "empty", "action": "BLOCK"}]}`)

	out, err := g.Check("ids EMP-123456, emp-654321 and EMP-1234567; ProjectZEUS projectzeus")
	require.NoError(t, err)
	// Case-insensitive like LiteLLM's re.IGNORECASE unless the regex says (?-i); the unnamed
	// regex is "custom_regex"; empty matches of "x*" mask and block nothing.
	require.Equal(t, "ids [EMPLOYEE_ID_REDACTED], [EMPLOYEE_ID_REDACTED] and EMP-1234567; [CUSTOM_REGEX_REDACTED] projectzeus", out)

	_, err = g.Check("a xx b")
	require.EqualError(t, err, "Content blocked: empty pattern detected")

	g = compile(t, `{"guardrail": "litellm_content_filter", "patterns": [
		{"pattern_type": "regex", "pattern": "секрет\\w*", "name": "  ", "action": "BLOCK"}]}`)
	_, err = g.Check("это СЕКРЕТНО")
	require.EqualError(t, err, "Content blocked: custom_regex pattern detected")
}

func TestLuhn(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"4111111111111111", "378282246310005", "6011000990139424", "0", "18"} {
		require.True(t, luhn([]byte(n)), n)
	}
	for _, n := range []string{"4111111111111112", "378282246310006", "1", "19"} {
		require.False(t, luhn([]byte(n)), n)
	}
}

// TestDigitRulesShareScan checks that several digit-started rules, including more than fit the
// scan's stack buffer, each find their own non-overlapping matches.
func TestDigitRulesShareScan(t *testing.T) {
	t.Parallel()
	var ps []string
	for range 5 {
		for _, n := range []string{"us_ssn", "ipv4"} {
			ps = append(ps, fmt.Sprintf(`{"pattern_type": "prebuilt", "pattern_name": %q, "action": "MASK"}`, n))
		}
	}
	g := compile(t, `{"guardrail": "litellm_content_filter", "patterns": [`+strings.Join(ps, ",")+`]}`)
	out, err := g.Check("1.2.3.4 123-45-6789 10.0.0.1")
	require.NoError(t, err)
	require.Equal(t, "[IPV4_REDACTED] [US_SSN_REDACTED] [IPV4_REDACTED]", out)
}
