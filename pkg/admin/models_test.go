package admin

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// newModelAdmin is an Admin over a fake store and a real models registry (in memory).
func newModelAdmin(t *testing.T) (*Admin, *fakeStore, *registry.Registry[*router.Deployment]) {
	t.Helper()
	reg := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	cfg, err := router.BuildConfig("cfg-1", "cfg", []byte(`{"model":"openai/gpt-4o","api_key":"sk-cfg"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetConfig(map[string]*router.Deployment{"cfg-1": cfg})
	st := newFakeStore()
	return New(Deps{Store: st, Router: router.New(reg, nil, router.Settings{}), Registries: []Sink{reg}}), st, reg
}

func ptr(s string) *string { return &s }

func asInvalid(t *testing.T, err error, msg string) {
	t.Helper()
	var in *Invalid
	if !errors.As(err, &in) || in.Msg != msg {
		t.Fatalf("want Invalid %q, got %T %v", msg, err, err)
	}
}

func asNotFound(t *testing.T, err error, msg string) {
	t.Helper()
	var nf *NotFound
	if !errors.As(err, &nf) || nf.Msg != msg {
		t.Fatalf("want NotFound %q, got %T %v", msg, err, err)
	}
}

func asConflict(t *testing.T, err error, msg string) {
	t.Helper()
	var cf *Conflict
	if !errors.As(err, &cf) || cf.Msg != msg {
		t.Fatalf("want Conflict %q, got %T %v", msg, err, err)
	}
}

var gpt = json.RawMessage(`{"model":"openai/gpt-4o","api_key":"sk-secret-123456"}`)

func TestCreateModel(t *testing.T) {
	a, st, reg := newModelAdmin(t)
	ctx := context.Background()
	_, err := a.CreateModel(ctx, ModelInput{LitellmParams: gpt, ModelInfo: map[string]any{}})
	asInvalid(t, err, "model_name is required")
	_, err = a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), ModelInfo: map[string]any{}})
	asInvalid(t, err, "litellm_params is required")
	_, err = a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: json.RawMessage(`{}`), ModelInfo: map[string]any{}})
	var in *Invalid
	if !errors.As(err, &in) || in.Msg[:14] != "Invalid model:" {
		t.Fatalf("an unbuildable model: %v", err)
	}
	_, err = a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: gpt, ID: "cfg-1", ModelInfo: map[string]any{}})
	asInvalid(t, err, `model_info.id "cfg-1" is already used by a config-file model`)
	if st.txs != 0 {
		t.Fatalf("refused input opened %d transactions", st.txs)
	}

	row, err := a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: gpt, ID: "m-1", ModelInfo: map[string]any{"db_model": true, "x": 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := reg.Load().ByID("m-1")
	if !ok || e.Version != row.Version || e.Value.ModelName != "m" {
		t.Fatalf("the writer serves its own write: %+v", e)
	}
	var info map[string]any
	var m ModelRow
	_ = json.Unmarshal(row.Data, &m)
	_ = json.Unmarshal(m.ModelInfo, &info)
	if info["id"] != "m-1" || info["db_model"] != nil || info["x"] != 1.0 {
		t.Fatalf("model_info stored: %v", info)
	}
	_, err = a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: gpt, ID: "m-1", ModelInfo: map[string]any{}})
	asConflict(t, err, "model with id=m-1 already exists")

	// no id: a new uuid
	row, err = a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: gpt})
	if err != nil || len(row.ID) != 36 {
		t.Fatalf("generated id %q: %v", row.ID, err)
	}
	// the database down: its error as is, nothing applied
	st.failOn["insert model"] = errDown
	_, err = a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: gpt, ID: "m-2"})
	if !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID("m-2"); ok {
		t.Fatal("a failed write is applied")
	}
}

func TestEditAndDeleteModel(t *testing.T) {
	a, st, reg := newModelAdmin(t)
	ctx := context.Background()
	if _, err := a.CreateModel(ctx, ModelInput{ModelName: ptr("m"), LitellmParams: gpt, ID: "m-1", ModelInfo: map[string]any{"a": "1"}}); err != nil {
		t.Fatal(err)
	}
	_, err := a.EditModel(ctx, "cfg-1", ModelInput{})
	asInvalid(t, err, configModelErr)
	_, err = a.EditModel(ctx, "nope", ModelInput{})
	asNotFound(t, err, "Model with id=nope not found")
	_, err = a.EditModel(ctx, "m-1", ModelInput{ModelName: ptr("")})
	asInvalid(t, err, "model_name cannot be empty")
	_, err = a.EditModel(ctx, "m-1", ModelInput{LitellmParams: json.RawMessage(`{"model":""}`)})
	if _, ok := err.(*Invalid); !ok {
		t.Fatalf("an edit that makes the model invalid: %v", err)
	}

	// a masked secret sent back keeps the stored one; params and info are merged
	row, err := a.EditModel(ctx, "m-1", ModelInput{ModelName: ptr("n"), LitellmParams: json.RawMessage(`{"api_key":"sk****3456","rpm":5}`), ModelInfo: map[string]any{"b": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Load().ByID("m-1")
	if e.Version != row.Version || e.Value.ModelName != "n" {
		t.Fatalf("edit applied: %+v", e.Value)
	}
	var m ModelRow
	_ = json.Unmarshal(row.Data, &m)
	var info map[string]any
	_ = json.Unmarshal(m.ModelInfo, &info)
	if info["a"] != "1" || info["b"] != "2" || info["id"] != "m-1" {
		t.Fatalf("model_info merged: %v", info)
	}
	if e.Value.ModelName != "n" {
		t.Fatal(e.Value.ModelName)
	}

	// update races a delete: NotFound
	st.failOn["update model"] = store.ErrNotFound
	_, err = a.EditModel(ctx, "m-1", ModelInput{})
	asNotFound(t, err, "Model with id=m-1 not found")
	delete(st.failOn, "update model")
	st.failOn["lock model"] = errDown
	if _, err = a.EditModel(ctx, "m-1", ModelInput{}); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	delete(st.failOn, "lock model")

	asInvalid(t, a.DeleteModel(ctx, ""), "id is required")
	asInvalid(t, a.DeleteModel(ctx, "cfg-1"), "Can't delete model. Model in config. Remove it from the config file instead.")
	asNotFound(t, a.DeleteModel(ctx, "nope"), "Model with id=nope not found")
	if err := a.DeleteModel(ctx, "m-1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID("m-1"); ok {
		t.Fatal("a delete is applied at once")
	}
	// the deleted version arriving late (a read-through, the feed) is refused by the tombstone
	reg.Apply([]store.Row{row}, nil)
	if _, ok := reg.Load().ByID("m-1"); ok {
		t.Fatal("the tombstone refuses the stale row")
	}
}
