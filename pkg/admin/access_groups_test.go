package admin

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"lockstep/pkg/store"
)

func TestAccessGroups(t *testing.T) {
	a, st, reg := newModelAdmin(t)
	ctx := context.Background()
	for _, m := range []struct{ id, name string }{{"m-1", "a"}, {"m-2", "a"}, {"m-3", "b"}} {
		if _, err := a.CreateModel(ctx, ModelInput{ModelName: ptr(m.name), LitellmParams: gpt, ID: m.id}); err != nil {
			t.Fatal(err)
		}
	}
	st.put(store.Model, store.Values{"model_id": "bad", "model_name": "c", "model_info": []byte(`[1]`)})

	_, err := a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: " "})
	asInvalid(t, err, "access_group is required and cannot be empty")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g"})
	asInvalid(t, err, "Either model_names or model_ids must be provided and non-empty")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelNames: []string{""}})
	asInvalid(t, err, "model_names must not contain empty values")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelIDs: []string{" "}})
	asInvalid(t, err, "model_ids must not contain empty values")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelNames: []string{"x", "a", "y"}})
	asInvalid(t, err, "Model(s) not found: x, y")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelNames: []string{"cfg"}})
	asInvalid(t, err, "Can't find model 'cfg' in Database. Access group management is only supported for database models.")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelIDs: []string{"cfg-1"}})
	asInvalid(t, err, "Deployment with model_id 'cfg-1' is defined in the config file. Access group management is only supported for database models.")
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelIDs: []string{"bad"}})
	asInvalid(t, err, "Can't change the access groups of model bad: model_info is not a JSON object; fix the row first")

	res, err := a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelNames: []string{"a", "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (AccessGroupResult{Names: []string{"a"}, IDs: []string{"m-1", "m-2"}, Updated: 2}); !reflect.DeepEqual(res, want) {
		t.Fatalf("got %+v want %+v", res, want)
	}
	if e, _ := reg.Load().ByID("m-1"); !reflect.DeepEqual(e.Value.AccessGroups, []string{"g"}) {
		t.Fatalf("the tag is served at once: %v", e.Value.AccessGroups)
	}
	_, err = a.CreateAccessGroup(ctx, AccessGroupRequest{AccessGroup: "g", ModelIDs: []string{"m-3"}})
	asConflict(t, err, "Access group 'g' already exists. Use PUT /access_group/g/update to modify it.")

	_, err = a.ReplaceAccessGroup(ctx, "nope", AccessGroupRequest{ModelIDs: []string{"m-3"}})
	asNotFound(t, err, "Access group 'nope' not found")
	_, err = a.ReplaceAccessGroup(ctx, "g", AccessGroupRequest{})
	asInvalid(t, err, "Either model_names or model_ids must be provided and non-empty")
	// model_ids win over model_names
	res, err = a.ReplaceAccessGroup(ctx, "g", AccessGroupRequest{ModelNames: []string{"a"}, ModelIDs: []string{"m-2", "m-3"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (AccessGroupResult{Names: []string{"a", "b"}, IDs: []string{"m-2", "m-3"}, Updated: 2}); !reflect.DeepEqual(res, want) {
		t.Fatalf("got %+v want %+v", res, want)
	}
	if e, _ := reg.Load().ByID("m-1"); len(e.Value.AccessGroups) != 0 {
		t.Fatalf("untagged at once: %v", e.Value.AccessGroups)
	}

	gi, err := a.AccessGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if want := (&AccessGroupInfo{AccessGroup: "g", ModelNames: []string{"a", "b"}, ModelIDs: []string{"m-2", "m-3"}, DeploymentCount: 2}); !reflect.DeepEqual(gi, want) {
		t.Fatalf("got %+v", gi)
	}
	_, err = a.AccessGroup(ctx, "nope")
	asNotFound(t, err, "Access group 'nope' not found")

	_, err = a.DeleteAccessGroup(ctx, "nope")
	asNotFound(t, err, "Access group 'nope' not found")
	res, err = a.DeleteAccessGroup(ctx, "g")
	if err != nil || res.Updated != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	groups, err := a.AccessGroups(ctx)
	if err != nil || len(groups) != 0 {
		t.Fatalf("%v %v", groups, err)
	}
	st.failOn["list model"] = errDown
	if _, err := a.AccessGroups(ctx); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	if _, err := a.DeleteAccessGroup(ctx, "g"); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
}
