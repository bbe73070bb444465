package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// --- helpers (prefixed ag: package itest is shared with other test files) -------------------

// agNewModel adds a DB model answering locally (mock_response) through g and returns its id.
func agNewModel(t *testing.T, g *Gateway, name string) string {
	t.Helper()
	st, b := g.Do(t, "POST", "/model/new", map[string]any{
		"model_name":     name,
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
	})
	require.Equal(t, 200, st, "%s", b)
	id, _ := JSON(t, b)["model_id"].(string)
	require.NotEmpty(t, id, "%s", b)
	return id
}

// agChat calls /v1/chat/completions for model with key.
func agChat(t *testing.T, g *Gateway, key, model string) (int, []byte) {
	t.Helper()
	return g.DoKey(t, key, "POST", "/v1/chat/completions", map[string]any{
		"model": model, "messages": []map[string]any{{"role": "user", "content": "hello"}},
	})
}

// agGenKey generates a virtual key for models through g.
func agGenKey(t *testing.T, g *Gateway, models ...string) string {
	t.Helper()
	st, b := g.Do(t, "POST", "/key/generate", map[string]any{"models": models})
	require.Equal(t, 200, st, "%s", b)
	k, _ := JSON(t, b)["key"].(string)
	require.NotEmpty(t, k, "%s", b)
	return k
}

// agDetail returns detail.error of a LiteLLM-style error body.
func agDetail(t *testing.T, b []byte) string {
	t.Helper()
	d, ok := JSON(t, b)["detail"].(map[string]any)
	require.True(t, ok, "no detail envelope: %s", b)
	msg, _ := d["error"].(string)
	return msg
}

// agOpenAIError returns error.type and error.message of an OpenAI-style error body.
func agOpenAIError(t *testing.T, b []byte) (typ, msg string) {
	t.Helper()
	e, ok := JSON(t, b)["error"].(map[string]any)
	require.True(t, ok, "no error envelope: %s", b)
	typ, _ = e["type"].(string)
	msg, _ = e["message"].(string)
	return typ, msg
}

// agModels lists /v1/models as key sees it on g.
func agModels(t *testing.T, g *Gateway, key string) []string {
	t.Helper()
	st, b := g.DoKey(t, key, "GET", "/v1/models", nil)
	require.Equal(t, 200, st, "%s", b)
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	ids := []string{}
	for _, d := range out.Data {
		ids = append(ids, d.ID)
	}
	sort.Strings(ids)
	return ids
}

// agScalar runs a one-value query straight on the database.
func agScalar[T any](t *testing.T, db, sql string, args ...any) T {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v T
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&v))
	return v
}

// agGroups reads model_info.access_groups of model id straight from the database.
func agGroups(t *testing.T, db, id string) []string {
	t.Helper()
	raw := agScalar[string](t, db, "SELECT COALESCE(model_info->'access_groups', '[]'::jsonb)::text FROM gateway.models WHERE model_id = $1", id)
	var gs []string
	require.NoError(t, json.Unmarshal([]byte(raw), &gs))
	sort.Strings(gs)
	return gs
}

// agRegistryGroups reads the access groups replica g serves for model id (/model/info).
func agRegistryGroups(t *testing.T, g *Gateway, id string) []string {
	t.Helper()
	st, b := g.Do(t, "GET", "/model/info?litellm_model_id="+id, nil)
	require.Equal(t, 200, st, "%s", b)
	var out struct {
		Data []struct {
			ModelInfo struct {
				AccessGroups []string `json:"access_groups"`
			} `json:"model_info"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	if len(out.Data) == 0 {
		return nil
	}
	gs := append([]string{}, out.Data[0].ModelInfo.AccessGroups...)
	sort.Strings(gs)
	return gs
}

func agSorted(s ...string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func agStrs(v any) []string {
	out := []string{}
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// --- tests ----------------------------------------------------------------------------------------

// A group created on A gives a key generated on A access, on B at once, to exactly the tagged
// models; update replaces membership; delete takes the access away on B.
func TestAccessGroupKeyAccessAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	m1a := agNewModel(t, p.A, "ag-m1")
	m1b := agNewModel(t, p.A, "ag-m1") // second deployment of the same model group
	m2 := agNewModel(t, p.A, "ag-m2")
	m3 := agNewModel(t, p.A, "ag-m3")

	st, b := p.A.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "team-a", "model_names": []string{"ag-m1", "ag-m2"}})
	require.Equal(t, 200, st, "%s", b)
	res := JSON(t, b)
	require.Equal(t, "team-a", res["access_group"])
	require.Equal(t, []string{"ag-m1", "ag-m2"}, agStrs(res["model_names"]))
	require.Equal(t, agSorted(m1a, m1b, m2), agStrs(res["model_ids"]))
	require.EqualValues(t, 3, res["models_updated"])
	for _, id := range []string{m1a, m1b, m2} {
		require.Equal(t, []string{"team-a"}, agGroups(t, p.DB, id))
	}
	require.Empty(t, agGroups(t, p.DB, m3))

	key := agGenKey(t, p.A, "team-a")
	for _, m := range []string{"ag-m1", "ag-m2"} {
		st, b = agChat(t, p.B, key, m)
		require.Equal(t, 200, st, "model %s on B: %s", m, b)
	}
	st, b = agChat(t, p.B, key, "ag-m3")
	require.Equal(t, 401, st, "%s", b)
	typ, msg := agOpenAIError(t, b)
	require.Equal(t, "key_model_access_denied", typ)
	require.Equal(t, "key not allowed to access model. This key can only access models=['team-a']. Tried to access ag-m3", msg)
	require.Equal(t, []string{"ag-m1", "ag-m2"}, agModels(t, p.B, key))

	// info and list read the database: the same answer on either replica
	for _, g := range []*Gateway{p.A, p.B} {
		st, b = g.Do(t, "GET", "/access_group/team-a/info", nil)
		require.Equal(t, 200, st, "%s", b)
		info := JSON(t, b)
		require.Equal(t, "team-a", info["access_group"])
		require.Equal(t, []string{"ag-m1", "ag-m2"}, agStrs(info["model_names"]))
		require.Equal(t, agSorted(m1a, m1b, m2), agStrs(info["model_ids"]))
		require.EqualValues(t, 3, info["deployment_count"])
	}
	st, b = p.B.Do(t, "GET", "/access_group/list", nil)
	require.Equal(t, 200, st, "%s", b)
	idsJSON, _ := json.Marshal(agSorted(m1a, m1b, m2))
	require.JSONEq(t, fmt.Sprintf(`{"access_groups": [{"access_group": "team-a", "model_names": ["ag-m1", "ag-m2"],
		"model_ids": %s, "deployment_count": 3}]}`, idsJSON), string(b))

	// update replaces the membership: ag-m1 and ag-m2 leave, ag-m3 joins
	st, b = p.A.Do(t, "PUT", "/access_group/team-a/update", map[string]any{"model_names": []string{"ag-m3"}})
	require.Equal(t, 200, st, "%s", b)
	res = JSON(t, b)
	require.Equal(t, []string{"ag-m3"}, agStrs(res["model_names"]))
	require.Equal(t, []string{m3}, agStrs(res["model_ids"]))
	require.EqualValues(t, 4, res["models_updated"]) // 3 untagged + 1 tagged
	require.Empty(t, agGroups(t, p.DB, m1a))
	require.Equal(t, []string{"team-a"}, agGroups(t, p.DB, m3))
	Eventually(t, "B serves the updated membership", func() bool {
		st3, _ := agChat(t, p.B, key, "ag-m3")
		st1, _ := agChat(t, p.B, key, "ag-m1")
		return st3 == 200 && st1 == 401
	})
	require.Equal(t, []string{"ag-m3"}, agModels(t, p.B, key))

	// delete: the key loses access everywhere; the models keep serving
	st, b = p.A.Do(t, "DELETE", "/access_group/team-a/delete", nil)
	require.Equal(t, 200, st, "%s", b)
	require.JSONEq(t, `{"access_group": "team-a", "models_updated": 1, "message": "Access group 'team-a' deleted successfully"}`, string(b))
	st, _ = agChat(t, p.A, key, "ag-m3")
	require.Equal(t, 401, st, "writer-local apply: A denies at once")
	Eventually(t, "B denies the key after the group is deleted", func() bool {
		st, _ := agChat(t, p.B, key, "ag-m3")
		return st == 401
	})
	require.Empty(t, agModels(t, p.B, key))
	st, b = agChat(t, p.B, MasterKey, "ag-m3")
	require.Equal(t, 200, st, "the model still serves: %s", b)
	st, b = p.B.Do(t, "GET", "/access_group/team-a/info", nil)
	require.Equal(t, 404, st, "%s", b)
	require.Equal(t, "Access group 'team-a' not found", agDetail(t, b))
}

// Every refusal answers in LiteLLM's detail envelope with the exact text, and writes nothing.
func TestAccessGroupErrors(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: `
model_list:
  - model_name: ag-cfg
    litellm_params: {model: openai/x, mock_response: hi}
    model_info: {id: ag-cfg-id}
`})
	id := agNewModel(t, p.A, "ag-e1")
	agNewModel(t, p.A, "ag-e2")

	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		msg    string
	}{
		{"empty name", "POST", "/access_group/new", map[string]any{"access_group": "", "model_names": []string{"ag-e1"}}, 400, "access_group is required and cannot be empty"},
		{"blank name", "POST", "/access_group/new", map[string]any{"access_group": "  ", "model_names": []string{"ag-e1"}}, 400, "access_group is required and cannot be empty"},
		{"no name", "POST", "/access_group/new", map[string]any{"model_names": []string{"ag-e1"}}, 400, "access_group is required and cannot be empty"},
		{"no models", "POST", "/access_group/new", map[string]any{"access_group": "g"}, 400, "Either model_names or model_ids must be provided and non-empty"},
		{"unknown models", "POST", "/access_group/new", map[string]any{"access_group": "g", "model_names": []string{"ag-e1", "nope-1", "nope-2"}}, 400, "Model(s) not found: nope-1, nope-2"},
		{"unknown ids", "POST", "/access_group/new", map[string]any{"access_group": "g", "model_ids": []string{id, "no-such-id"}}, 400, "Model(s) not found: no-such-id"},
		{"config model name", "POST", "/access_group/new", map[string]any{"access_group": "g", "model_names": []string{"ag-cfg"}}, 400, "Can't find model 'ag-cfg' in Database. Access group management is only supported for database models."},
		{"config model id", "POST", "/access_group/new", map[string]any{"access_group": "g", "model_ids": []string{"ag-cfg-id"}}, 400, "Deployment with model_id 'ag-cfg-id' is defined in the config file. Access group management is only supported for database models."},
		{"malformed json", "POST", "/access_group/new", "{", 400, ""},
		{"info unknown", "GET", "/access_group/ghost/info", nil, 404, "Access group 'ghost' not found"},
		{"update unknown", "PUT", "/access_group/ghost/update", map[string]any{"model_names": []string{"ag-e1"}}, 404, "Access group 'ghost' not found"},
		{"delete unknown", "DELETE", "/access_group/ghost/delete", nil, 404, "Access group 'ghost' not found"},
	}
	for _, tc := range cases {
		st, b := p.A.Do(t, tc.method, tc.path, tc.body)
		require.Equal(t, tc.status, st, "%s: %s", tc.name, b)
		msg := agDetail(t, b)
		if tc.msg != "" {
			require.Equal(t, tc.msg, msg, tc.name)
		} else {
			require.NotEmpty(t, msg, tc.name)
		}
	}
	require.Zero(t, agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.models WHERE model_info ? 'access_groups'"), "a refused write leaves no trace")
	rt := p.A.ReadThrough(t, "models")
	require.GreaterOrEqual(t, rt["not_found"]+rt["negative_hits"], 2.0, "missing names are read through before the 400: %v", rt)

	// 409 with the exact text; the existing group is untouched
	st, b := p.A.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "dup", "model_names": []string{"ag-e1"}})
	require.Equal(t, 200, st, "%s", b)
	for _, g := range []*Gateway{p.A, p.B} {
		st, b = g.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "dup", "model_names": []string{"ag-e2"}})
		require.Equal(t, 409, st, "%s", b)
		require.Equal(t, "Access group 'dup' already exists. Use PUT /access_group/dup/update to modify it.", agDetail(t, b))
	}
	st, b = p.B.Do(t, "GET", "/access_group/dup/info", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, []string{"ag-e1"}, agStrs(JSON(t, b)["model_names"]))

	// update refusing unknown models leaves the membership as it was
	st, b = p.B.Do(t, "PUT", "/access_group/dup/update", map[string]any{"model_names": []string{"ag-e2", "nope-3"}})
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "Model(s) not found: nope-3", agDetail(t, b))
	require.Equal(t, []string{"dup"}, agGroups(t, p.DB, id))

	// group names needing URL escapes round-trip through the path
	st, b = p.A.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "a/b c", "model_names": []string{"ag-e2"}})
	require.Equal(t, 200, st, "%s", b)
	st, b = p.B.Do(t, "GET", "/access_group/a%2Fb%20c/info", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "a/b c", JSON(t, b)["access_group"])

	// only the master key manages access groups
	key := agGenKey(t, p.A)
	st, _ = p.B.DoKey(t, key, "GET", "/access_group/list", nil)
	require.Equal(t, 403, st)
	st, _ = p.B.DoKey(t, key, "POST", "/access_group/new", map[string]any{"access_group": "x", "model_names": []string{"ag-e1"}})
	require.Equal(t, 403, st)
	st, _ = p.B.DoKey(t, "", "GET", "/access_group/list", nil)
	require.Equal(t, 401, st)
}

// A model another tool wrote straight into Postgres, whose notification never reached A (the
// triggers are bypassed here, as if it were lost), is found by A's read-through; B serves the
// tagged model to a group key.
func TestAccessGroupReadThroughOfUnseenModel(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	// session_replication_role=replica skips the change-log trigger: no notification, version 0.
	PSQL(t, p.DB, `SET session_replication_role = replica;
		INSERT INTO gateway.models (model_id, model_name, litellm_params, model_info)
		VALUES ('psql-id', 'ag-psql', '{"model": "openai/x", "mock_response": "hi"}', '{"note": "kept"}');`)
	require.Nil(t, agRegistryGroups(t, p.A, "psql-id"))
	st, b := p.A.Do(t, "GET", "/model/info?litellm_model_id=psql-id", nil)
	require.Equal(t, 200, st)
	require.Empty(t, JSON(t, b)["data"], "A must not hold the model yet")
	before := p.A.ReadThrough(t, "models")["found"]

	st, b = p.A.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "psql-group", "model_names": []string{"ag-psql"}})
	require.Equal(t, 200, st, "%s", b)
	require.EqualValues(t, 1, JSON(t, b)["models_updated"])
	require.Equal(t, before+1, p.A.ReadThrough(t, "models")["found"], "%v", p.A.ReadThrough(t, "models"))
	require.Equal(t, "kept", agScalar[string](t, p.DB, "SELECT model_info->>'note' FROM gateway.models WHERE model_id = 'psql-id'"),
		"other model_info fields survive")

	key := agGenKey(t, p.A, "psql-group")
	st, b = agChat(t, p.B, key, "ag-psql")
	require.Equal(t, 200, st, "%s", b)
	st, b = agChat(t, p.A, key, "ag-psql")
	require.Equal(t, 200, st, "%s", b)
}

// Concurrent creates of different groups over the same models, on both replicas, all land:
// every model ends with every tag (no lost update). Concurrent creates of one group: one wins,
// the others get 409.
func TestAccessGroupConcurrentCreates(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	var ids []string
	for i := range 3 {
		ids = append(ids, agNewModel(t, p.A, fmt.Sprintf("ag-c%d", i)))
		ids = append(ids, agNewModel(t, p.B, fmt.Sprintf("ag-c%d", i)))
	}
	names := []string{"ag-c0", "ag-c1", "ag-c2"}
	const n = 6
	var groups []string
	for i := range n {
		groups = append(groups, fmt.Sprintf("cg-%d", i))
	}
	var wg sync.WaitGroup
	statuses := make([]int, n)
	bodies := make([][]byte, n)
	// model edits racing the group writes read-modify-write model_info too: they must not
	// drop a tag written in between
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 3 {
				st, b := p.B.Do(t, "PATCH", "/model/"+id+"/update", map[string]any{"model_info": map[string]any{"note": fmt.Sprint(j)}})
				if st != 200 {
					t.Errorf("PATCH %s: %d %s", id, st, b)
				}
			}
		}()
	}
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := p.A
			if i%2 == 1 {
				r = p.B
			}
			statuses[i], bodies[i] = r.Do(t, "POST", "/access_group/new", map[string]any{"access_group": g, "model_names": names})
		}()
	}
	wg.Wait()
	for i := range n {
		require.Equal(t, 200, statuses[i], "%s", bodies[i])
		require.EqualValues(t, len(ids), JSON(t, bodies[i])["models_updated"])
	}
	for _, id := range ids {
		require.Equal(t, groups, agGroups(t, p.DB, id), "model %s", id)
		require.Equal(t, "2", agScalar[string](t, p.DB, "SELECT model_info->>'note' FROM gateway.models WHERE model_id = $1", id))
	}
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, "replica "+g.ReplicaID+" serves every tag", func() bool {
			for _, id := range ids {
				if fmt.Sprint(agRegistryGroups(t, g, id)) != fmt.Sprint(groups) {
					return false
				}
			}
			return true
		})
	}

	// the same group created concurrently: exactly one 200
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := p.A
			if i%2 == 1 {
				r = p.B
			}
			statuses[i], bodies[i] = r.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "same", "model_names": names[i%3 : i%3+1]})
		}()
	}
	wg.Wait()
	ok := 0
	for i := range n {
		switch statuses[i] {
		case 200:
			ok++
		case 409:
			require.Equal(t, "Access group 'same' already exists. Use PUT /access_group/same/update to modify it.", agDetail(t, bodies[i]))
		default:
			t.Fatalf("unexpected %d: %s", statuses[i], bodies[i])
		}
	}
	require.Equal(t, 1, ok)
	require.EqualValues(t, 2, agScalar[int64](t, p.DB, `SELECT count(*) FROM gateway.models WHERE model_info->'access_groups' ? 'same'`))
}

// model_ids tags exactly the listed deployments, not every deployment of their model group.
func TestAccessGroupByModelIDs(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	d1 := agNewModel(t, p.A, "ag-dup")
	d2 := agNewModel(t, p.A, "ag-dup")
	other := agNewModel(t, p.A, "ag-other")

	st, b := p.A.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "by-id", "model_ids": []string{d1, d1}})
	require.Equal(t, 200, st, "%s", b)
	res := JSON(t, b)
	require.Equal(t, []string{"ag-dup"}, agStrs(res["model_names"]))
	require.Equal(t, []string{d1}, agStrs(res["model_ids"]))
	require.EqualValues(t, 1, res["models_updated"])
	require.Equal(t, []string{"by-id"}, agGroups(t, p.DB, d1))
	require.Empty(t, agGroups(t, p.DB, d2))

	// update by id moves the group to the other deployments
	st, b = p.B.Do(t, "PUT", "/access_group/by-id/update", map[string]any{"model_ids": []string{d2, other}})
	require.Equal(t, 200, st, "%s", b)
	res = JSON(t, b)
	require.Equal(t, []string{"ag-dup", "ag-other"}, agStrs(res["model_names"]))
	require.Equal(t, agSorted(d2, other), agStrs(res["model_ids"]))
	require.EqualValues(t, 3, res["models_updated"])
	require.Empty(t, agGroups(t, p.DB, d1))
	require.Equal(t, []string{"by-id"}, agGroups(t, p.DB, d2))

	key := agGenKey(t, p.B, "by-id")
	Eventually(t, "A serves the group to the key", func() bool {
		st, _ := agChat(t, p.A, key, "ag-other")
		return st == 200
	})
}
