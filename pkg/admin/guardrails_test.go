package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func newGuardrailAdmin(t *testing.T) (*Admin, *fakeStore, *registry.Registry[*guardrail.Guardrail]) {
	t.Helper()
	reg := registry.New(registry.Options[*guardrail.Guardrail]{Type: store.Guardrail, Build: guardrail.BuildRow,
		Names: func(e *registry.Entry[*guardrail.Guardrail]) []string { return []string{e.Value.Name} }})
	cfg, err := guardrail.Compile("cfg-g", json.RawMessage(`{"guardrail":"litellm_content_filter","mode":"pre_call","blocked_words":[{"keyword":"x","action":"BLOCK"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	reg.SetConfig(map[string]*guardrail.Guardrail{"config:cfg-g": cfg})
	st := newFakeStore()
	return New(Deps{Store: st, Guardrails: reg, Registries: []Sink{reg}}), st, reg
}

var gparams = []byte(`{"guardrail":"litellm_content_filter","mode":"pre_call","blocked_words":[{"keyword":"bad","action":"BLOCK"}],"api_key":"sk-guard-secret-1234"}`)

func TestGuardrails(t *testing.T) {
	a, st, reg := newGuardrailAdmin(t)
	ctx := context.Background()
	info := []byte(`{}`)
	for _, c := range []struct {
		w   GuardrailWrite
		msg string
	}{
		{GuardrailWrite{Name: " ", Params: gparams, Info: info}, "guardrail_name is required and cannot be empty"},
		{GuardrailWrite{Name: "a\x01", Params: gparams, Info: info}, "guardrail_name must not contain control characters"},
		{GuardrailWrite{Name: "cfg-g", Params: gparams, Info: info}, "Guardrail with name 'cfg-g' already exists in the config file; choose another guardrail_name"},
		{GuardrailWrite{Name: "g", Params: gparams, Info: info, Status: "on"}, `status must be one of active, pending_review, rejected, got "on"`},
		{GuardrailWrite{Name: "g", Params: gparams, Info: []byte(`[]`)}, "guardrail_info must be a JSON object"},
		{GuardrailWrite{Name: "g", Info: info}, "Guardrail configuration error: litellm_params is required"},
	} {
		_, err := a.CreateGuardrail(ctx, c.w)
		asInvalid(t, err, c.msg)
	}
	_, err := a.CreateGuardrail(ctx, GuardrailWrite{Name: "g", Params: []byte(`{"guardrail":"nope"}`), Info: info})
	var in *Invalid
	if !errors.As(err, &in) || !strings.HasPrefix(in.Msg, "Guardrail configuration error: ") {
		t.Fatal(err)
	}

	row, err := a.CreateGuardrail(ctx, GuardrailWrite{Name: "g", Params: gparams, Info: info})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID(row.ID); !ok {
		t.Fatal("an active guardrail is served at once")
	}
	st.failOn["insert guardrail"] = store.ErrConflict
	_, err = a.CreateGuardrail(ctx, GuardrailWrite{Name: "g", Params: gparams, Info: info})
	asInvalid(t, err, "Guardrail with name 'g' already exists")
	st.failOn["insert guardrail"] = store.ErrInvalid
	_, err = a.CreateGuardrail(ctx, GuardrailWrite{Name: "g", Params: gparams, Info: info})
	asInvalid(t, err, "invalid guardrail: invalid row")
	delete(st.failOn, "insert guardrail")
	pending, err := a.CreateGuardrail(ctx, GuardrailWrite{Name: "p", Params: gparams, Info: info, Status: "pending_review"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID(pending.ID); ok {
		t.Fatal("a pending guardrail is never served")
	}

	// replace: the status kept unless given; a masked secret kept; a non-active status removes it
	asInvalid(t, a.EditableGuardrail("config:cfg-g"), configGuardrailEditErr)
	_, err = a.ReplaceGuardrail(ctx, "config:cfg-g", GuardrailWrite{})
	asInvalid(t, err, configGuardrailEditErr)
	_, err = a.ReplaceGuardrail(ctx, row.ID, GuardrailWrite{Name: "", Params: gparams, Info: info})
	asInvalid(t, err, "guardrail_name is required and cannot be empty")
	_, err = a.ReplaceGuardrail(ctx, "nope", GuardrailWrite{Name: "g", Params: gparams, Info: info})
	asNotFound(t, err, "Guardrail with ID nope not found")
	masked := []byte(strings.Replace(string(gparams), "sk-guard-secret-1234", "sk****1234", 1))
	row, err = a.ReplaceGuardrail(ctx, row.ID, GuardrailWrite{Name: "g2", Params: masked, Info: info})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(row.Data), "sk-guard-secret-1234") {
		t.Fatalf("a masked secret keeps the stored one: %s", row.Data)
	}
	if e, _ := reg.Load().ByID(row.ID); e.Value.Name != "g2" {
		t.Fatal("replace applied at once")
	}
	if _, err = a.ReplaceGuardrail(ctx, row.ID, GuardrailWrite{Name: "g2", Params: gparams, Info: info, Status: "rejected"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID(row.ID); ok {
		t.Fatal("a rejected guardrail leaves the registry at once")
	}
	st.failOn["update guardrail"] = store.ErrConflict
	_, err = a.ReplaceGuardrail(ctx, row.ID, GuardrailWrite{Name: "p", Params: gparams, Info: info})
	asInvalid(t, err, "Guardrail with name 'p' already exists")
	delete(st.failOn, "update guardrail")
	st.failOn["lock guardrail"] = errDown
	if _, err = a.ReplaceGuardrail(ctx, row.ID, GuardrailWrite{Name: "p", Params: gparams, Info: info}); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	delete(st.failOn, "lock guardrail")

	// patch: merged, default_on shortcut, status
	_, err = a.PatchGuardrail(ctx, "config:cfg-g", GuardrailPatch{})
	asInvalid(t, err, configGuardrailEditErr)
	_, err = a.PatchGuardrail(ctx, row.ID, GuardrailPatch{Params: json.RawMessage(`[]`)})
	asInvalid(t, err, "litellm_params must be a JSON object")
	_, err = a.PatchGuardrail(ctx, row.ID, GuardrailPatch{Info: json.RawMessage(`1`)})
	asInvalid(t, err, "guardrail_info must be a JSON object")
	_, err = a.PatchGuardrail(ctx, "nope", GuardrailPatch{})
	asNotFound(t, err, "Guardrail with ID nope not found")
	_, err = a.PatchGuardrail(ctx, row.ID, GuardrailPatch{Status: ptr("bogus")})
	asInvalid(t, err, `status must be one of active, pending_review, rejected, got "bogus"`)
	on := true
	row, err = a.PatchGuardrail(ctx, row.ID, GuardrailPatch{Name: ptr("g3"), Status: ptr("active"), DefaultOn: &on, Info: json.RawMessage(`{"k":"v"}`)})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := reg.Load().ByID(row.ID)
	if !ok || e.Value.Name != "g3" || !e.Value.DefaultOn {
		t.Fatalf("patch applied, active again: %+v", e)
	}
	st.failOn["update guardrail"] = store.ErrNotFound
	_, err = a.PatchGuardrail(ctx, row.ID, GuardrailPatch{})
	asNotFound(t, err, "Guardrail with ID "+row.ID+" not found")
	delete(st.failOn, "update guardrail")
	st.put(store.Guardrail, store.Values{"guardrail_id": "broken", "guardrail_name": "b", "litellm_params": []byte(`[1]`), "status": "active"})
	_, err = a.PatchGuardrail(ctx, "broken", GuardrailPatch{})
	asInvalid(t, err, "litellm_params must be a JSON object")

	// reads
	rows, err := a.GuardrailRows(ctx)
	if err != nil || len(rows) != 3 {
		t.Fatalf("%d %v", len(rows), err)
	}
	if _, err := a.GuardrailRow(ctx, row.ID); err != nil {
		t.Fatal(err)
	}
	_, err = a.GuardrailRow(ctx, "nope")
	asNotFound(t, err, "Guardrail with ID nope not found")
	asNotFound(t, GuardrailNotFound("x"), "Guardrail with ID x not found")

	// delete
	asInvalid(t, a.DeleteGuardrail(ctx, "config:cfg-g"), configGuardrailDeleteErr)
	asNotFound(t, a.DeleteGuardrail(ctx, "nope"), "Guardrail with ID nope not found")
	if err := a.DeleteGuardrail(ctx, row.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID(row.ID); ok {
		t.Fatal("the delete is applied at once")
	}
}
