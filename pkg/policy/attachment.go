package policy

import (
	"encoding/json"
	"fmt"
	"strings"

	"lockstep/pkg/store"
)

// Attachment is a gateway.policy_attachments row as served (sql/021; LiteLLM's
// PolicyAttachment, litellm/types/proxy/policy_engine/policy_types.py): where the policy named
// Policy applies. Global (scope "*") applies it to every call; otherwise a call must match
// every one of Teams, Keys and Models (an empty list matches every call) and, when Tags is not
// empty, one of its tags must match Tags (LiteLLM PolicyMatcher.scope_matches). Immutable.
type Attachment struct {
	ID     string   `json:"attachment_id"`
	Policy string   `json:"policy_name"`
	Teams  []string `json:"teams"`
	Keys   []string `json:"keys"`
	Models []string `json:"models"`
	Tags   []string `json:"tags"`
	// Global is scope "*".
	Global bool `json:"-"`
}

// Context is what a call is matched against (LiteLLM PolicyMatchContext): the caller's team
// alias and key alias ("" none: only a "*" pattern matches it), the model the call names and
// the request's tags.
type Context struct {
	TeamAlias, KeyAlias, Model string
	Tags                       []string
}

// attachmentRow is a gateway.policy_attachments row as row_to_json writes it.
type attachmentRow struct {
	Attachment
	Scope *string `json:"scope"`
}

// BuildAttachmentRow builds an Attachment from a gateway.policy_attachments row. A row without
// a policy name is refused (the serving version, if any, stays).
func BuildAttachmentRow(r store.Row) (*Attachment, error) {
	var x attachmentRow
	if err := json.Unmarshal(r.Data, &x); err != nil {
		return nil, fmt.Errorf("policy attachment %s: %w", r.ID, err)
	}
	a := x.Attachment
	if a.Policy == "" {
		return nil, fmt.Errorf("policy attachment %s: policy_name is empty", r.ID)
	}
	a.Global = x.Scope != nil && *x.Scope == "*"
	if a.ID == "" {
		a.ID = r.ID
	}
	return &a, nil
}

// MatchPattern reports whether value matches one of patterns, LiteLLM's wildcard rule
// (PolicyMatcher.matches_pattern over RouteChecks._route_matches_wildcard_pattern): a pattern
// ending in "*" matches every value starting with what precedes it ("*" every value), any
// other pattern only itself. An empty value (no alias) matches only "*".
func MatchPattern(value string, patterns []string) bool {
	for _, p := range patterns {
		if p == "*" {
			return true
		}
		if value == "" {
			continue
		}
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(value, pre) {
				return true
			}
		} else if p == value {
			return true
		}
	}
	return false
}

// orAll is patterns, or ["*"] when there are none (LiteLLM PolicyScope.get_teams and friends).
func orAll(patterns []string) []string {
	if len(patterns) == 0 {
		return star
	}
	return patterns
}

var star = []string{"*"}

// Matches reports whether the attachment applies to a call with context c, and why: LiteLLM's
// matched_via (AttachmentRegistry._describe_match_reason) — "scope:*" for a global one, else
// "tag:<the first matching tag>", "team:<alias>", "key:<alias>", "model:<model>" for each
// scope the attachment names (joined by "+"), "scope:default" when it names none.
func (a *Attachment) Matches(c Context) (bool, string) {
	if a.Global {
		return true, "scope:*"
	}
	if !MatchPattern(c.TeamAlias, orAll(a.Teams)) || !MatchPattern(c.KeyAlias, orAll(a.Keys)) || !MatchPattern(c.Model, orAll(a.Models)) {
		return false, ""
	}
	tag := ""
	if len(a.Tags) > 0 {
		for _, t := range c.Tags {
			if MatchPattern(t, a.Tags) {
				tag = t
				break
			}
		}
		if tag == "" {
			return false, ""
		}
	}
	var why []string
	if tag != "" {
		why = append(why, "tag:"+tag)
	}
	if len(a.Teams) > 0 && c.TeamAlias != "" {
		why = append(why, "team:"+c.TeamAlias)
	}
	if len(a.Keys) > 0 && c.KeyAlias != "" {
		why = append(why, "key:"+c.KeyAlias)
	}
	if len(a.Models) > 0 && c.Model != "" {
		why = append(why, "model:"+c.Model)
	}
	if len(why) == 0 {
		return true, "scope:default"
	}
	return true, strings.Join(why, "+")
}
