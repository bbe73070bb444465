package guardrail

import (
	"strings"
	"testing"
)

// benchParams is a realistic configuration: 20 keywords (one wildcard) and 8 patterns.
const benchParams = `{
	"guardrail": "litellm_content_filter",
	"mode": ["pre_call", "post_call"],
	"blocked_words": [
		{"keyword": "confidential", "action": "MASK"},
		{"keyword": "internal only", "action": "MASK"},
		{"keyword": "do not distribute", "action": "MASK"},
		{"keyword": "project falcon", "action": "MASK"},
		{"keyword": "acquisition target", "action": "MASK"},
		{"keyword": "layoff", "action": "MASK"},
		{"keyword": "salary band", "action": "MASK"},
		{"keyword": "root password", "action": "MASK"},
		{"keyword": "private key", "action": "MASK"},
		{"keyword": "bearer token", "action": "MASK"},
		{"keyword": "codename", "action": "MASK"},
		{"keyword": "embargoed", "action": "MASK"},
		{"keyword": "unreleased", "action": "MASK"},
		{"keyword": "trade secret", "action": "MASK"},
		{"keyword": "insider", "action": "MASK"},
		{"keyword": "kill switch", "action": "MASK"},
		{"keyword": "backdoor", "action": "MASK"},
		{"keyword": "jailbreak", "action": "MASK"},
		{"keyword": "пароль", "action": "MASK"},
		{"keyword": "pass*phrase", "action": "MASK"}
	],
	"patterns": [
		{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "us_ssn", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "us_phone", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "credit_card", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "ipv4", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "aws_access_key", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "github_token", "action": "MASK"},
		{"pattern_type": "regex", "pattern": "\\bEMP-\\d{6}\\b", "name": "employee_id", "action": "MASK"}
	]
}`

const benchParagraph = `Hi team, following up on yesterday's incident review (2024-05-13, 14:30 UTC). The deploy of
service v2.14.3 to the eu-west cluster started at 09:12 and the error rate on /api/v1/orders rose
from 0.2% to 7.5% within 4 minutes. Rolling back to v2.14.2 fixed it by 09:41. Root cause: the new
connection pool default of 16 was too small for the 48 worker goroutines, so requests queued for up
to 2500 ms and the upstream gateway timed out after 2000 ms. Action items: raise the pool size to 64,
add an alert on p99 latency above 800 ms, and document the tuning in the runbook (section 3.2).
Could you summarise this for the weekly report, in three bullet points, and suggest one more
safeguard? Thanks! — Maria, SRE on call. P.S. Die Überprüfung ergab keine Datenverluste; всё в порядке.
`

// benchText returns a ~4 KB message; with matches it carries an email, a phone number and a
// keyword.
func benchText(withMatches bool) string {
	var b strings.Builder
	for b.Len() < 4096-len(benchParagraph) {
		b.WriteString(benchParagraph)
	}
	if withMatches {
		b.WriteString("Reach me at maria.lopez@example.com or 555-123-4567; this is confidential.\n")
	} else {
		b.WriteString("Reach me on the usual channel; this is fine to share with the whole org.\n")
	}
	return b.String()
}

// benchCJK is a paragraph with non-ASCII decimal digits and spaces (full-width, ideographic),
// where every digit and lead byte is a candidate start for the digit scanners.
const benchCJK = "障害報告：２０２４年５月１３日　１４時３０分、サービス　ｖ２．１４．３　の展開後にエラー率が" +
	"０．２％から７．５％に上昇しました。接続プールの既定値１６は４８の処理に対して小さすぎました。" +
	"対策：プールを６４に増やし、８００ミリ秒を超える遅延に警報を設定します。よろしくお願いします。\n"

// BenchmarkCheck4KB runs Check on a ~4 KB message with 20 keywords and 8 patterns.
func BenchmarkCheck4KB(b *testing.B) {
	g, err := Compile("bench", []byte(benchParams))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		matches bool
		cjk     bool
	}{{"no_match", false, false}, {"mask_3", true, false}, {"cjk_no_match", false, true}} {
		text := benchText(bc.matches)
		if bc.cjk {
			text = strings.Repeat(benchCJK, 4096/len(benchCJK)+1)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := g.Check(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
