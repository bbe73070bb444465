package call

import (
	"encoding/json"
	"testing"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// groupsRegistry holds one unified access group per entry of models (id → access_model_names).
func groupsRegistry(t *testing.T, models map[string][]string) *registry.Registry[*accounts.AccessGroup] {
	t.Helper()
	reg := registry.New(registry.Options[*accounts.AccessGroup]{Type: store.AccessGroup, Build: accounts.BuildAccessGroupRow})
	var rows []store.Row
	for id, ms := range models {
		b, _ := json.Marshal(map[string]any{"access_group_id": id, "access_group_name": "n-" + id, "access_model_names": ms})
		rows = append(rows, store.Row{Type: store.AccessGroup, ID: id, Version: 1, Data: b})
	}
	reg.Apply(rows, nil)
	return reg
}

// LiteLLM auth_checks.py can_key_call_model / can_team_access_model with access_group_ids:
// a key (team) with groups and no models is narrowed to the groups' models; with models, the
// groups widen them; a group this replica does not hold, or one naming no model, grants nothing.
func TestCanUseWithAccessGroups(t *testing.T) {
	t.Parallel()
	reg := groupsRegistry(t, map[string][]string{"g1": {"m1"}, "g2": {"openai/*"}, "empty": nil})
	key := func(models []string, groups ...string) *keys.Key {
		k := &keys.Key{Token: "t", Models: models}
		if len(groups) > 0 {
			k.Extra = &keys.Extra{AccessGroupIDs: groups}
		}
		return k
	}
	for _, c := range []struct {
		name  string
		who   Caller
		model string
		want  bool
	}{
		{"no groups, no models: every model", Caller{Key: key(nil), Groups: reg}, "m9", true},
		{"narrowed to the group", Caller{Key: key(nil, "g1"), Groups: reg}, "m1", true},
		{"narrowed: others refused", Caller{Key: key(nil, "g1"), Groups: reg}, "m2", false},
		{"a wildcard in the group", Caller{Key: key(nil, "g2"), Groups: reg}, "openai/gpt-4o", true},
		{"a group naming no model", Caller{Key: key(nil, "empty"), Groups: reg}, "m1", false},
		{"a group not held", Caller{Key: key(nil, "gone"), Groups: reg}, "m1", false},
		{"no registry", Caller{Key: key(nil, "g1")}, "m1", false},
		{"models widened by the group", Caller{Key: key([]string{"m2"}, "g1"), Groups: reg}, "m1", true},
		{"models still allow their own", Caller{Key: key([]string{"m2"}, "g1"), Groups: reg}, "m2", true},
		{"models and group: neither", Caller{Key: key([]string{"m2"}, "g1"), Groups: reg}, "m3", false},
		{"team narrowed", Caller{Key: key(nil), Team: teamWithGroups("g1"), Groups: reg}, "m2", false},
		{"team's group model", Caller{Key: key(nil), Team: teamWithGroups("g1"), Groups: reg}, "m1", true},
	} {
		if got := c.who.CanUse(c.model, nil); got != c.want {
			t.Errorf("%s: CanUse(%q) = %v, want %v", c.name, c.model, got, c.want)
		}
	}
}

func teamWithGroups(ids ...string) *accounts.Team {
	t := &accounts.Team{ID: "team"}
	t.Fields.AccessGroupIDs = ids
	return t
}
