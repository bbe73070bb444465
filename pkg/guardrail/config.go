package guardrail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// GuardrailType is the only litellm_params "guardrail" value this package compiles.
const GuardrailType = "litellm_content_filter"

// Default redaction formats (LiteLLM ContentFilterGuardrail.PATTERN_REDACTION_FORMAT and
// KEYWORD_REDACTION_STR).
const (
	DefaultPatternRedactionFormat = "[{pattern_name}_REDACTED]"
	DefaultKeywordRedactionTag    = "[KEYWORD_REDACTED]"
)

// ConfigError is a litellm_params validation error from [Compile]. Error returns
// "<Field>: <Message>", e.g.
//
//	patterns[2].pattern: invalid regex "(": missing closing )
//	blocked_words[0].action: must be BLOCK or MASK, got "DROP"
//
// The HTTP layer prefixes it with "Guardrail configuration error: ".
type ConfigError struct {
	// Field is the JSON path of the bad field inside litellm_params, e.g. "patterns[2].pattern";
	// "litellm_params" when the document itself is bad.
	Field string
	// Message says what is wrong with it.
	Message string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func configErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Compile validates litellm_params (a JSON object) of the guardrail called name and compiles it.
//
// Accepted keys (LiteLLM content filter; null means absent; other keys are ignored, LiteLLM
// passes many):
//
//	guardrail                 required, "litellm_content_filter"
//	mode                      "pre_call" | "post_call" | "during_call", or an array of them;
//	                          default "pre_call"
//	default_on                bool, default false
//	blocked_words             [{"keyword": string, "action": "BLOCK"|"MASK", "description"?: string}]
//	patterns                  [{"pattern_type": "prebuilt", "pattern_name": <PrebuiltPatterns>, "action"}
//	                           | {"pattern_type": "regex", "pattern": <Go RE2>, "name"?: string, "action"}]
//	pattern_redaction_format  string with a {pattern_name} placeholder, default "[{pattern_name}_REDACTED]"
//	keyword_redaction_tag     string, default "[KEYWORD_REDACTED]"
//
// action is case-insensitive. A regex pattern is compiled case-insensitively, as LiteLLM compiles
// it with re.IGNORECASE ((?-i) turns that off); its name defaults to "custom_regex". A keyword
// may use '*' as a wildcard (see [Guardrail.Check]).
//
// Rejected, rather than silently ignored, because they would weaken the filter: a non-empty
// blocked_words_file (LiteLLM reads a YAML file from the proxy's disk; list the words inline in
// blocked_words instead) and non-empty categories (LiteLLM's bundled content categories are
// not implemented).
//
// Every error is a *ConfigError naming the field, e.g. `mode: unsupported mode "x" (supported:
// pre_call, post_call, during_call)` or `guardrail: unsupported guardrail type "foo"
// (supported: litellm_content_filter)`.
func Compile(name string, litellmParams []byte) (*Guardrail, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(litellmParams, &raw); err != nil || raw == nil {
		msg := "must be a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, &ConfigError{Field: "litellm_params", Message: msg}
	}
	g := &Guardrail{Name: name}
	var compact bytes.Buffer
	if err := json.Compact(&compact, litellmParams); err == nil {
		g.Params = compact.Bytes()
	}

	var typ string
	if err := decodeString(raw, "guardrail", &typ); err != nil {
		return nil, err
	}
	if typ != GuardrailType {
		if typ == "" {
			return nil, configErr("guardrail", "required (supported: %s)", GuardrailType)
		}
		return nil, configErr("guardrail", "unsupported guardrail type %q (supported: %s)", typ, GuardrailType)
	}

	modes, err := parseModes(raw["mode"])
	if err != nil {
		return nil, err
	}
	g.Modes = modes

	if v, ok := present(raw, "default_on"); ok {
		if err := json.Unmarshal(v, &g.DefaultOn); err != nil {
			return nil, configErr("default_on", "must be a boolean, got %s", jsonKind(v))
		}
	}

	patternFormat := DefaultPatternRedactionFormat
	if err := decodeString(raw, "pattern_redaction_format", &patternFormat); err != nil {
		return nil, err
	}
	if patternFormat == "" {
		patternFormat = DefaultPatternRedactionFormat
	}
	keywordTag := DefaultKeywordRedactionTag
	if err := decodeString(raw, "keyword_redaction_tag", &keywordTag); err != nil {
		return nil, err
	}
	if keywordTag == "" {
		keywordTag = DefaultKeywordRedactionTag
	}

	if v, ok := present(raw, "blocked_words_file"); ok && !isEmptyValue(v) {
		return nil, configErr("blocked_words_file", "not supported; list the words inline in blocked_words")
	}
	if v, ok := present(raw, "categories"); ok && !isEmptyValue(v) {
		return nil, configErr("categories", "not supported; use blocked_words and patterns")
	}

	ac := newACBuilder()
	if err := g.compilePatterns(raw, patternFormat, ac); err != nil {
		return nil, err
	}
	if err := g.compileKeywords(raw, keywordTag, ac); err != nil {
		return nil, err
	}
	if !ac.empty() {
		if g.ac, err = ac.build(); err != nil {
			return nil, configErr("blocked_words", "%v", err)
		}
	}
	return g, nil
}

var allModes = []Mode{PreCall, PostCall, DuringCall}

func parseModes(v json.RawMessage) ([]Mode, error) {
	if isNull(v) {
		return []Mode{PreCall}, nil
	}
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		m, err := parseMode("mode", one)
		if err != nil {
			return nil, err
		}
		return []Mode{m}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, configErr("mode", "must be a string or an array of strings, got %s", jsonKind(v))
	}
	if len(list) == 0 {
		return nil, configErr("mode", "must name at least one of %s", modeNames())
	}
	modes := make([]Mode, 0, len(list))
	for i, item := range list {
		field := fmt.Sprintf("mode[%d]", i)
		var s string
		if err := json.Unmarshal(item, &s); err != nil || isNull(item) {
			return nil, configErr(field, "must be a string, got %s", jsonKind(item))
		}
		m, err := parseMode(field, s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return modes, nil
}

func parseMode(field, s string) (Mode, error) {
	for _, m := range allModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", configErr(field, "unsupported mode %q (supported: %s)", s, modeNames())
}

func modeNames() string {
	names := make([]string, len(allModes))
	for i, m := range allModes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// patternRule is one compiled entry of "patterns".
type patternRule struct {
	name   string // prebuilt pattern_name or regex name; used in BlockedError and the tag
	action Action
	tag    string // MASK replacement
	kind   matcherKind
	re     *pyRegex // kind == kindRegex
	// prefBit is set in scanState.regex when a literal required by re occurs; 0 when re has no
	// such literal and always runs.
	prefBit uint64
}

type rawPattern struct {
	PatternType *string `json:"pattern_type"`
	PatternName *string `json:"pattern_name"`
	Pattern     *string `json:"pattern"`
	Name        *string `json:"name"`
	Action      *string `json:"action"`
}

func (g *Guardrail) compilePatterns(raw map[string]json.RawMessage, format string, ac *acBuilder) error {
	items, err := decodeObjectArray(raw, "patterns")
	if err != nil {
		return err
	}
	prefilters := 0
	for i, item := range items {
		field := fmt.Sprintf("patterns[%d]", i)
		var p rawPattern
		if err := decodeObject(field, item, &p); err != nil {
			return err
		}
		action, err := parseAction(field+".action", p.Action)
		if err != nil {
			return err
		}
		rule := patternRule{action: action}
		switch str(p.PatternType) {
		case "prebuilt":
			name := str(p.PatternName)
			if name == "" {
				return configErr(field+".pattern_name", `required for pattern_type "prebuilt" (known: %s)`, strings.Join(PrebuiltPatterns(), ", "))
			}
			pb, ok := prebuiltByName[name]
			if !ok {
				return configErr(field+".pattern_name", "unknown prebuilt pattern %q (known: %s)", name, strings.Join(PrebuiltPatterns(), ", "))
			}
			rule.name, rule.kind, rule.re = name, pb.kind, pb.re
		case "regex":
			expr := str(p.Pattern)
			if expr == "" {
				return configErr(field+".pattern", `required for pattern_type "regex"`)
			}
			re, err := compileUserRegex(expr)
			if err != nil {
				return configErr(field+".pattern", "%s", err.Error())
			}
			rule.name, rule.kind, rule.re = "custom_regex", kindRegex, re
			if n := strings.TrimSpace(str(p.Name)); n != "" {
				rule.name = n
			}
		case "":
			return configErr(field+".pattern_type", `required ("prebuilt" or "regex")`)
		default:
			return configErr(field+".pattern_type", `must be "prebuilt" or "regex", got %q`, *p.PatternType)
		}
		rule.tag = strings.ReplaceAll(format, "{pattern_name}", strings.ToUpper(rule.name))
		if rule.re != nil {
			if lits := regexLiterals(rule.re.re); len(lits) > 0 {
				rule.prefBit = 1 << min(prefilters, 63) // past 63, regexes share a bit
				prefilters++
				for _, lit := range lits {
					ac.add(lit, len(g.patterns), outRegex)
				}
			}
		}
		if rule.kind.startsOnDigit() {
			g.digitRules = append(g.digitRules, len(g.patterns))
		} else {
			g.otherRules = append(g.otherRules, len(g.patterns))
		}
		g.patterns = append(g.patterns, rule)
	}
	return nil
}

// compileUserRegex compiles a custom pattern case-insensitively (LiteLLM uses re.IGNORECASE),
// with Python's Unicode \d, \s, \w and edge \b (see pyRegex). The error message quotes the
// user's expression, e.g. `invalid regex "(": missing closing )`.
func compileUserRegex(expr string) (*pyRegex, error) {
	if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			if se.Expr == "" || se.Expr == expr {
				return nil, fmt.Errorf("invalid regex %q: %s", expr, se.Code)
			}
			return nil, fmt.Errorf("invalid regex %q: %s: %q", expr, se.Code, se.Expr)
		}
		return nil, fmt.Errorf("invalid regex %q: %v", expr, err)
	}
	re, err := compilePy("(?i)" + expr)
	if err != nil {
		return nil, fmt.Errorf("invalid regex %q: %v", expr, err)
	}
	return re, nil
}

// keywordRule is one compiled entry of "blocked_words".
type keywordRule struct {
	report      string // keyword lower-cased, for BlockedError (LiteLLM reports keyword.lower())
	description string
	action      Action
	tag         string
	runes       int            // rune count of a literal keyword (to find the match start)
	wildcard    *regexp.Regexp // non-nil when the keyword contains '*'
	wildBit     uint64         // bit set in the scan when the prefilter segment occurs
}

type rawKeyword struct {
	Keyword     *string `json:"keyword"`
	Action      *string `json:"action"`
	Description *string `json:"description"`
}

func (g *Guardrail) compileKeywords(raw map[string]json.RawMessage, tag string, b *acBuilder) error {
	items, err := decodeObjectArray(raw, "blocked_words")
	if err != nil {
		return err
	}
	wildcards := 0
	for i, item := range items {
		field := fmt.Sprintf("blocked_words[%d]", i)
		var k rawKeyword
		if err := decodeObject(field, item, &k); err != nil {
			return err
		}
		kw := str(k.Keyword)
		if kw == "" {
			return configErr(field+".keyword", "required")
		}
		if strings.TrimSpace(kw) == "" {
			return configErr(field+".keyword", "must not be blank")
		}
		action, err := parseAction(field+".action", k.Action)
		if err != nil {
			return err
		}
		rule := keywordRule{
			report:      strings.ToLower(kw),
			description: str(k.Description),
			action:      action,
			tag:         tag,
		}
		idx := len(g.keywords)
		if strings.Contains(kw, "*") {
			re, longest, err := compileWildcard(kw)
			if err != nil {
				return configErr(field+".keyword", "%s", err.Error())
			}
			rule.wildcard = re
			rule.wildBit = 1 << min(wildcards, 63) // past 63, wildcards share a bit
			wildcards++
			b.add(longest, idx, outWildcard)
		} else {
			rule.runes = b.add(kw, idx, outKeyword)
		}
		g.keywords = append(g.keywords, rule)
	}
	return nil
}

func parseAction(field string, v *string) (Action, error) {
	if v == nil {
		return "", configErr(field, "required (BLOCK or MASK)")
	}
	switch a := Action(strings.ToUpper(strings.TrimSpace(*v))); a {
	case Block, Mask:
		return a, nil
	}
	return "", configErr(field, "must be BLOCK or MASK, got %q", *v)
}

// present returns raw[key] unless it is missing or JSON null.
func present(raw map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := raw[key]
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

func isNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// isEmptyValue reports whether v is "", [], {} or false (null is filtered by present).
func isEmptyValue(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case `""`, "[]", "{}", "false":
		return true
	}
	return false
}

func decodeString(raw map[string]json.RawMessage, key string, dst *string) error {
	v, ok := present(raw, key)
	if !ok {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return configErr(key, "must be a string, got %s", jsonKind(v))
	}
	return nil
}

func decodeObjectArray(raw map[string]json.RawMessage, key string) ([]json.RawMessage, error) {
	v, ok := present(raw, key)
	if !ok {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, configErr(key, "must be an array of objects, got %s", jsonKind(v))
	}
	return items, nil
}

// decodeObject decodes one array item into dst, naming the bad member on a type error.
func decodeObject(field string, item json.RawMessage, dst any) error {
	if k := jsonKind(item); k != "object" {
		return configErr(field, "must be an object, got %s", k)
	}
	if err := json.Unmarshal(item, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			// Every member we decode is a string.
			return configErr(field+"."+te.Field, "must be a string, got %s", te.Value)
		}
		return configErr(field, "%v", err)
	}
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
