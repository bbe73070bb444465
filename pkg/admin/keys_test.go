package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func newKeyAdmin(t *testing.T) (*Admin, *fakeStore, *registry.Registry[*keys.Key]) {
	t.Helper()
	a, st, models := newModelAdmin(t)
	kr := registry.New(registry.Options[*keys.Key]{Type: store.Key, Build: keys.BuildRow})
	return New(Deps{Store: st, Router: a.router, Registries: []Sink{models, kr}}), st, kr
}

func raw(s string) optional { return optional{set: true, raw: json.RawMessage(s)} }

func TestGenerateKey(t *testing.T) {
	a, st, kr := newKeyAdmin(t)
	ctx := context.Background()
	st.put(store.User, store.Values{"user_id": "u1"})
	st.put(store.Team, store.Values{"team_id": "t1", "models": []string{"gpt", "grp"}})
	if _, err := a.CreateModel(ctx, ModelInput{ModelName: ptr("tagged"), LitellmParams: gpt, ID: "m-t", ModelInfo: map[string]any{"access_groups": []string{"grp2"}}}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		req KeyRequest
		msg string
	}{
		{KeyRequest{Key: "nope"}, "key: a custom key must start with 'sk-'"},
		{KeyRequest{Key: "sk-"}, "key: a custom key needs characters after 'sk-' and no surrounding spaces"},
		{KeyRequest{Duration: ptr("1x")}, `duration: "1x" is not a duration like 30s, 30m, 1h, 30d, 2w or 1mo`},
		{KeyRequest{Metadata: json.RawMessage(`[]`)}, "metadata must be a JSON object"},
		{KeyRequest{RPMLimit: raw(`-1`)}, "rpm_limit must be a non-negative integer or null, got -1"},
		{KeyRequest{TPMLimit: raw(`"x"`)}, `tpm_limit must be a non-negative integer or null, got "x"`},
		{KeyRequest{MaxParallel: raw(`4294967296`)}, "max_parallel_requests must be a non-negative integer or null, got 4294967296"},
		{KeyRequest{MaxBudget: raw(`-1`)}, "max_budget must be a non-negative number (USD) or null, got -1"},
		{KeyRequest{BudgetDuration: raw(`5`)}, "budget_duration must be a duration string like 30s, 1h, 1d, 30d or 1mo, got 5"},
		{KeyRequest{BudgetDuration: raw(`"1x"`)}, `budget_duration: "1x" is not a duration like 30s, 30m, 1h, 30d, 2w or 1mo`},
		{KeyRequest{TeamID: ptr("nobody")}, "team_id: team nobody does not exist; create it with /team/new"},
		{KeyRequest{TeamID: ptr("t1"), Models: &[]string{"gpt", "other", "tagged"}}, "Model not in team's allowed models: ['other', 'tagged']. Team t1 can only access models=['gpt', 'grp']"},
	} {
		_, err := a.GenerateKey(ctx, c.req)
		asInvalid(t, err, c.msg)
	}
	if len(kr.Load().Names()) != 0 || kr.Len() != 0 {
		t.Fatal("a refused key is applied")
	}

	res, err := a.GenerateKey(ctx, KeyRequest{Key: "sk-mine", TeamID: ptr("t1"), UserID: ptr("u1"), Models: &[]string{"gpt", "grp"},
		KeyAlias: ptr("al"), Duration: ptr("1h"), Metadata: json.RawMessage(`{"a":1}`), Blocked: new(bool),
		RPMLimit: raw(`5`), TPMLimit: raw(`null`), MaxBudget: raw(`1.5`), BudgetDuration: raw(`"1d"`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Key != "sk-mine" || res.Row.ID != keys.Hash("sk-mine") || res.Spend == nil || res.Spend.BudgetResetAt == nil {
		t.Fatalf("%+v", res)
	}
	e, ok := kr.Load().ByID(keys.Hash("sk-mine"))
	if !ok || e.Value.TeamID != "t1" || !e.Value.Limits.HasRPM || e.Value.Limits.RPM != 5 {
		t.Fatalf("the writer serves its new key at once: %+v", e)
	}
	// a user_id no user has yet: the user is made with the key (LiteLLM), role internal_user
	if _, err := a.GenerateKey(ctx, KeyRequest{UserID: ptr("nobody-yet")}); err != nil {
		t.Fatal(err)
	}
	if u, err := st.Get(ctx, store.User, "nobody-yet"); err != nil || !strings.Contains(string(u.Data), `"user_role":"internal_user"`) {
		t.Fatalf("the key's new user: %s %v", u.Data, err)
	}
	_, err = a.GenerateKey(ctx, KeyRequest{Key: "sk-mine"})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a key that exists: %v", err)
	}
	// a team that allows every model; a key without its own list gets the team's models
	st.put(store.Team, store.Values{"team_id": "t2", "models": []string{keys.AllProxyModels}})
	if _, err := a.GenerateKey(ctx, KeyRequest{TeamID: ptr("t2"), Models: &[]string{"x"}}); err != nil {
		t.Fatal(err)
	}
	res, err = a.GenerateKey(ctx, KeyRequest{TeamID: ptr("t1"), Models: &[]string{}})
	if err != nil || !strings.HasPrefix(res.Key, "sk-") {
		t.Fatalf("%+v %v", res, err)
	}
	// the database down
	st.failOn["get user"] = errDown
	if _, err := a.GenerateKey(ctx, KeyRequest{UserID: ptr("u1")}); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
}

func TestUpdateBlockRegenerateDeleteKey(t *testing.T) {
	a, st, kr := newKeyAdmin(t)
	ctx := context.Background()
	st.put(store.Team, store.Values{"team_id": "t1", "models": []string{"gpt"}})
	res, err := a.GenerateKey(ctx, KeyRequest{Key: "sk-one", TeamID: ptr("t1"), Models: &[]string{"gpt"}})
	if err != nil {
		t.Fatal(err)
	}
	tok := res.Row.ID

	_, err = a.UpdateKey(ctx, KeyRequest{})
	asInvalid(t, err, "key is required")
	_, err = a.UpdateKey(ctx, KeyRequest{Key: "sk-one"})
	asInvalid(t, err, "nothing to update: give models, key_alias, duration, metadata, blocked, rpm_limit, tpm_limit, max_parallel_requests, max_budget, budget_duration or spend")
	_, err = a.UpdateKey(ctx, KeyRequest{Key: "sk-none", Models: &[]string{"gpt"}})
	asNotFound(t, err, "Key not found")
	_, err = a.UpdateKey(ctx, KeyRequest{Key: "sk-none", KeyAlias: ptr("x")})
	asNotFound(t, err, "Key not found")
	// the stored team binds the models an update gives
	_, err = a.UpdateKey(ctx, KeyRequest{Key: "sk-one", Models: &[]string{"other"}})
	asInvalid(t, err, "Model not in team's allowed models: ['other']. Team t1 can only access models=['gpt']")

	res, err = a.UpdateKey(ctx, KeyRequest{Key: tok, KeyAlias: ptr("new"), TeamID: ptr(""), BudgetDuration: raw(`""`), MaxBudget: raw(`null`), RPMLimit: raw(`null`)})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := kr.Load().ByID(tok); e.Value.Alias != "new" || e.Value.TeamID != "" || e.Version != res.Row.Version {
		t.Fatalf("update applied at once: %+v", e.Value)
	}
	if res.Key != tok {
		t.Fatalf("answered with the key as given: %q", res.Key)
	}

	_, err = a.BlockKey(ctx, "", true)
	asInvalid(t, err, "key is required")
	if _, err := a.BlockKey(ctx, "sk-one", true); err != nil {
		t.Fatal(err)
	}
	if e, _ := kr.Load().ByID(tok); !e.Value.Blocked {
		t.Fatal("block applied at once")
	}
	_, err = a.BlockKey(ctx, "sk-none", true)
	asNotFound(t, err, "Key not found")

	// regenerate: the new token served, the old one gone (tombstone), spend moved
	st.spendRows()[tok] = store.KeySpend{Spend: 2}
	_, err = a.RegenerateKey(ctx, "", "")
	asInvalid(t, err, "key is required")
	_, err = a.RegenerateKey(ctx, "sk-one", "bad")
	asInvalid(t, err, "key: a custom key must start with 'sk-'")
	_, err = a.RegenerateKey(ctx, "sk-none", "")
	asNotFound(t, err, "Key not found")
	res, err = a.RegenerateKey(ctx, "sk-one", "sk-two")
	if err != nil {
		t.Fatal(err)
	}
	if res.Spend == nil || res.Spend.Spend != 2 || res.Key != "sk-two" {
		t.Fatalf("%+v", res)
	}
	if _, ok := kr.Load().ByID(tok); ok {
		t.Fatal("the old token is refused at once")
	}
	if !kr.Holds(tok, res.Row.Version) {
		t.Fatal("the old token's tombstone is held")
	}
	if _, ok := kr.Load().ByID(keys.Hash("sk-two")); !ok {
		t.Fatal("the new token is served at once")
	}

	row, ks, err := a.Key(ctx, "sk-two")
	if err != nil || row.ID != keys.Hash("sk-two") || ks == nil || ks.Spend != 2 {
		t.Fatalf("%+v %+v %v", row, ks, err)
	}
	_, _, err = a.Key(ctx, "sk-one")
	asNotFound(t, err, "Key not found")
	rows, total, spends, err := a.Keys(ctx, 1, 10)
	if err != nil || total != 1 || len(rows) != 1 || spends[row.ID].Spend != 2 {
		t.Fatalf("%v %d %v %v", rows, total, spends, err)
	}

	asInvalid(t, a.DeleteKeys(ctx, nil), "keys is required: a non-empty list of keys to delete")
	asNotFound(t, a.DeleteKeys(ctx, []string{"sk-two", "sk-none-at-all"}), "Key not found: sk-no****-all")
	if _, ok := kr.Load().ByID(keys.Hash("sk-two")); !ok {
		t.Fatal("all or nothing: nothing deleted")
	}
	if err := a.DeleteKeys(ctx, []string{"sk-two", keys.Hash("sk-two")}); err != nil {
		t.Fatal(err)
	}
	if kr.Len() != 0 {
		t.Fatal("the delete is applied at once")
	}
	st.failOn["get key"] = errDown
	if err := a.DeleteKeys(ctx, []string{"x"}); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	if _, _, err := a.Key(ctx, "x"); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
}
