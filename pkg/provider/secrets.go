package provider

import (
	"lockstep/pkg/format"

	"bytes"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// MaskParams returns litellm_params JSON with secrets masked the way LiteLLM shows them in
// /model/info:
//   - every string value (at any depth) whose key contains "key", "secret", "token",
//     "password", "auth", "credential", "cookie" or "session" (case-insensitive), and every
//     value of extra_headers whatever its name (a header is sent as a credential as often as
//     not: Cookie, X-Goog-Api-Key, a gateway token), becomes its first 2 characters +
//     "****" + its last 4, or "****" when shorter than 12 characters;
//   - any other string value that parses as a URL with a password (userinfo "user:pass@")
//     keeps everything but the password, which becomes "****" ("http://u:****@host/v1").
//
// "os.environ/NAME" references are not secrets and are kept. Key order and everything else
// are kept byte for byte. Invalid JSON yields "{}" (never the secrets).
func MaskParams(litellmParams []byte) []byte {
	return MaskParamsExcept(litellmParams)
}

// MaskParamsExcept is [MaskParams] leaving the top-level members named in keep as they are:
// for params whose own fields only look like secrets, such as a content filter's
// blocked_words[].keyword.
func MaskParamsExcept(params []byte, keep ...string) []byte {
	if !format.ValidJSON(params) {
		return []byte("{}")
	}
	var edits []format.Edit
	var walk func(v gjson.Result, top, secret bool)
	walk = func(v gjson.Result, top, secret bool) {
		v.ForEach(func(k, val gjson.Result) bool {
			if top && k.Type == gjson.String && slices.Contains(keep, k.Str) {
				return true
			}
			switch {
			case val.IsObject() || val.IsArray():
				walk(val, false, secret || (top && k.Str == "extra_headers"))
			case val.Type != gjson.String || strings.HasPrefix(val.Str, "os.environ/"):
			case secret || (top && k.Str == "extra_headers") || (k.Type == gjson.String && sensitiveKey(k.Str)):
				edits = append(edits, format.Edit{Start: val.Index, End: val.Index + len(val.Raw), Text: maskSecret(val.Str)})
			default:
				if m, ok := maskURLPassword(val.Str); ok {
					edits = append(edits, format.Edit{Start: val.Index, End: val.Index + len(val.Raw), Text: m})
				}
			}
			return true
		})
	}
	walk(gjson.ParseBytes(params), true, false)
	return format.ApplyEdits(params, edits)
}

// RestoreMaskedSecrets returns incoming params (a write's litellm_params) with every string
// value that equals the masked form of the stored value at the same place (see
// [MaskParamsExcept] with the same keep) replaced by the stored value: a client that sends
// back what /model/info showed it ("sk****3456", "http://u:****@host/v1") keeps the real
// secret instead of overwriting it with the mask, as LiteLLM does on /model/update. Any other
// value, a changed secret included, is taken as sent. incoming is returned as is when nothing
// is restored or either input is not valid JSON; otherwise only the restored values change.
func RestoreMaskedSecrets(incoming, stored []byte, keep ...string) []byte {
	if len(stored) == 0 || !format.ValidJSON(incoming) || !format.ValidJSON(stored) {
		return incoming
	}
	masked := MaskParamsExcept(stored, keep...)
	var edits []format.Edit
	var walk func(in, st, mk gjson.Result)
	walk = func(in, st, mk gjson.Result) {
		i := 0
		in.ForEach(func(k, v gjson.Result) bool {
			var sv, mv gjson.Result
			switch {
			case in.IsArray():
				if st.IsArray() {
					p := strconv.Itoa(i)
					sv, mv = st.Get(p), mk.Get(p)
				}
				i++
			case st.IsObject():
				p := gjson.Escape(k.Str)
				sv, mv = st.Get(p), mk.Get(p)
			}
			switch {
			case v.IsObject() || v.IsArray():
				walk(v, sv, mv)
			case v.Type == gjson.String && sv.Type == gjson.String && mv.Type == gjson.String &&
				v.Str == mv.Str && sv.Str != mv.Str:
				edits = append(edits, format.Edit{Start: v.Index, End: v.Index + len(v.Raw), Text: sv.Str})
			}
			return true
		})
	}
	walk(gjson.ParseBytes(incoming), gjson.ParseBytes(stored), gjson.ParseBytes(masked))
	return format.ApplyEdits(incoming, edits)
}

func sensitiveKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range [...]string{"key", "secret", "token", "password", "auth", "credential", "cookie", "session"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func maskSecret(s string) string {
	if len(s) < 12 {
		return "****"
	}
	return s[:2] + "****" + s[len(s)-4:]
}

// maskURLPassword replaces the password of a URL with a non-empty one ("scheme://user:pass@
// host...") by "****", keeping every other byte of s. ok is false when s is not such a URL.
func maskURLPassword(s string) (string, bool) {
	start, end, ok := urlPassword(s)
	if !ok {
		return s, false
	}
	return s[:start] + "****" + s[end:], true
}

// urlPassword locates the password of a URL with a non-empty one, as written in s (maybe
// percent-encoded): s[start:end].
func urlPassword(s string) (start, end int, ok bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return 0, 0, false
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return 0, 0, false
	}
	if pw, set := u.User.Password(); !set || pw == "" {
		return 0, 0, false
	}
	// The authority runs to the first '/', '?' or '#'; its userinfo to the last '@' in it
	// (url.Parse splits it the same way), the username to the first ':'.
	auth := s[i+3:]
	if e := strings.IndexAny(auth, "/?#"); e >= 0 {
		auth = auth[:e]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return 0, 0, false
	}
	colon := strings.IndexByte(auth[:at], ':')
	if colon < 0 {
		return 0, 0, false
	}
	return i + 3 + colon + 1, i + 3 + at, true
}

// minRedactLen is the shortest secret redacted from upstream error text. Shorter values are
// placeholders ("none", "EMPTY" for vLLM) that replacing everywhere would garble messages.
const minRedactLen = 6

// collectSecrets lists what must never reach a client from d: the API key, the provider's
// other credentials, the api_base URL password (as written and decoded, and as the Basic
// credential net/http sends for it: basicCredential), and every value of extra_headers,
// whatever its name (with the credential after a scheme such as "Bearer " on its own, and each
// cookie value of a Cookie-like "a=b; c=d"); each also in its JSON-escaped forms
// (jsonEscapedForms). Values shorter than
// minRedactLen are left (placeholders). Longest first, so a secret containing another is
// replaced whole.
func (d *Deployment) collectSecrets() {
	var out []string
	add := func(s string) {
		if len(s) >= minRedactLen && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	add(d.APIKey)
	for _, x := range d.extraSecrets {
		add(x)
	}
	if start, end, ok := urlPassword(d.APIBase); ok {
		add(d.APIBase[start:end]) // as written
		if u, err := url.Parse(d.APIBase); err == nil {
			pw, _ := u.User.Password()
			add(pw) // decoded, as an error text may quote it
		}
	}
	add(basicCredential(d.APIBase)) // sent as "Authorization: Basic ..." when no key header is
	for _, v := range d.ExtraHeaders {
		add(v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			add(strings.TrimSpace(cred))
		}
		for _, part := range strings.Split(v, ";") {
			if _, val, ok := strings.Cut(part, "="); ok {
				add(strings.Trim(strings.TrimSpace(val), `"`))
			}
		}
	}
	for _, s := range slices.Clone(out) { // as echoed inside a JSON string
		for _, e := range jsonEscapedForms(s) {
			add(e)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	d.secrets = out
}

// Redact returns s with every secret of the deployment (see collectSecrets) replaced by its
// masked form ("sk****3456", or "****" when short), as /model/info shows it.
func (d *Deployment) Redact(s string) string {
	for _, sec := range d.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, maskSecret(sec))
		}
	}
	return s
}

func (d *Deployment) redactBytes(b []byte) []byte {
	for _, sec := range d.secrets {
		if bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte(maskSecret(sec)))
		}
	}
	return b
}

// redactErr returns err with the deployment's secrets removed from an [format.UpstreamError]'s
// Message and Body (or a [format.RequestError]'s Message): upstreams echo the key they were
// sent ("Incorrect API key provided: sk-..."), and those texts reach any caller of the model.
// Other errors are returned as is (the provider returns only those two or the caller's
// context error).
func (d *Deployment) redactErr(err error) error {
	if err == nil || len(d.secrets) == 0 {
		return err // before ue exists: its address escapes, so declaring it allocates
	}
	var ue *format.UpstreamError
	if !errors.As(err, &ue) {
		return d.redactRequestErr(err)
	}
	msg, body := d.Redact(ue.Message), d.redactBytes(ue.Body)
	if msg == ue.Message && len(body) == len(ue.Body) && bytes.Equal(body, ue.Body) {
		return err
	}
	cp := *ue
	cp.Message, cp.Body = msg, body
	return &cp
}

// redactRequestErr is redactErr for a [format.RequestError]: its Message redacted; any other
// error as is.
func (d *Deployment) redactRequestErr(err error) error {
	var re *format.RequestError
	if !errors.As(err, &re) {
		return err
	}
	if msg := d.Redact(re.Message); msg != re.Message {
		return &format.RequestError{Message: msg}
	}
	return err
}

// redactAny returns err's text with the deployment's secrets redacted, as a new error; an
// [format.UpstreamError] or [format.RequestError] keeps its type (redactErr). For texts built from an upstream answer or a
// transport error, which may quote a credential (a probe's "upstream answered 401: ...").
func (d *Deployment) redactAny(err error) error {
	var ue *format.UpstreamError
	var re *format.RequestError
	if err == nil || errors.As(err, &ue) || errors.As(err, &re) {
		return d.redactErr(err)
	}
	if msg := err.Error(); d.Redact(msg) != msg {
		return errors.New(d.Redact(msg))
	}
	return err
}

// sentCredentialHeaders are the request headers whose values a signer computes per request
// (so they are not among the deployment's secrets) and an upstream may echo in an error.
var sentCredentialHeaders = [...]string{"Authorization", "X-Amz-Security-Token", "X-Goog-Api-Key"}

// redactSent returns s with the per-request credentials req carried (a signer's bearer
// token: Vertex AI's OAuth2 access token, Bedrock's SigV4 signature) replaced by their masked
// form. Nothing to do for unsigned deployments, whose credentials are all in d.secrets.
func (d *Deployment) redactSent(req *http.Request, s string) string {
	if d.signer == nil {
		return s
	}
	for _, h := range sentCredentialHeaders {
		v := req.Header.Get(h)
		if len(v) < minRedactLen {
			continue
		}
		cands := []string{v}
		if _, cred, ok := strings.Cut(v, " "); ok {
			cands = append(cands, strings.TrimSpace(cred))
		}
		if i := strings.Index(v, "Signature="); i >= 0 {
			cands = append(cands, v[i+len("Signature="):])
		}
		for _, c := range cands {
			if len(c) >= minRedactLen && strings.Contains(s, c) {
				s = strings.ReplaceAll(s, c, maskSecret(c))
			}
		}
	}
	return s
}
