package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Issue 19 item 2, the roles test: every management route × every kind of caller × {own
// object, another's object} → the expected status (API.md "Roles and self-service"); every
// call is made on replica A; after every refusal the database's change log and spend rows are
// as before (nothing written anywhere), and a self-service write that succeeds is seen on B.

// rolePrincipal is one caller of the roles test.
type rolePrincipal struct {
	name  string
	key   string // "" no key
	user  string // its user ("" none)
	team  string // its key's team ("" none)
	own   string // the team it belongs to (for team routes)
	admin bool   // master or proxy_admin: passes every route
}

// roleEnv is the roles test's fixtures on a pair.
type roleEnv struct {
	t     *testing.T
	p     *Pair
	conn  *pgx.Conn
	seq   atomic.Int64
	ps    []rolePrincipal
	other struct{ user, team string }
}

func (e *roleEnv) id(prefix string) string { return fmt.Sprintf("%s-%d", prefix, e.seq.Add(1)) }

func (e *roleEnv) master(method, path string, body any) map[string]any {
	e.t.Helper()
	st, b := e.p.A.Do(e.t, method, path, body)
	require.Equal(e.t, 200, st, "%s %s: %s", method, path, b)
	return JSON(e.t, b)
}

// key makes a key of user and team ("" none) with the master key.
func (e *roleEnv) key(user, team string) string {
	body := map[string]any{}
	if user != "" {
		body["user_id"] = user
	}
	if team != "" {
		body["team_id"] = team
	}
	return e.master("POST", "/key/generate", body)["key"].(string)
}

// fingerprint is the database's write state: the change log (every registry write appends
// to it) and the spend rows.
func (e *roleEnv) fingerprint() string {
	e.t.Helper()
	var n, max, spend int64
	require.NoError(e.t, e.conn.QueryRow(context.Background(),
		`SELECT count(*), coalesce(max(seq), 0), (SELECT count(*) FROM gateway.key_spend) FROM gateway.registry_changes`).Scan(&n, &max, &spend))
	return fmt.Sprintf("%d/%d/%d", n, max, spend)
}

type roleReq struct {
	method, path string
	body         any
}

// roleRoute is one row: the request for a principal's own object and for another's, and the
// statuses expected, one per principal in roleEnv.ps order.
type roleRoute struct {
	name             string
	own, other       func(e *roleEnv, p rolePrincipal) roleReq
	wantOwn, wantOth string
	// after checks a 200 on replica B (nil: nothing to check).
	after func(e *roleEnv, p rolePrincipal, r roleReq, resp map[string]any)
}

func same(f func(e *roleEnv, p rolePrincipal) roleReq) (func(e *roleEnv, p rolePrincipal) roleReq, func(e *roleEnv, p rolePrincipal) roleReq) {
	return f, f
}

func fixed(method, path string, body any) func(*roleEnv, rolePrincipal) roleReq {
	return func(*roleEnv, rolePrincipal) roleReq { return roleReq{method, path, body} }
}

// the statuses of a route only the proxy admin may call (a = the admin's status), and of a
// read proxy_admin_viewer may make too
func adminWrite(a int) string { return fmt.Sprintf("401 401 403 403 403 403 403 403 %d %d", a, a) }
func adminRead(a int) string  { return fmt.Sprintf("401 401 403 403 403 403 403 %d %d %d", a, a, a) }

func TestRolesMatrix(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	conn, err := pgx.Connect(context.Background(), p.DB)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	e := &roleEnv{t: t, p: p, conn: conn}

	// users, teams and keys: T1 (member, team admin), T3 (internal_user and its viewer as
	// members), T2 the other's (u-other admin of it)
	for id, role := range map[string]string{"u-member": "internal_user", "u-tadmin": "internal_user", "u-iu": "internal_user",
		"u-iuv": "internal_user_viewer", "u-pav": "proxy_admin_viewer", "u-pa": "proxy_admin", "u-other": "internal_user"} {
		e.master("POST", "/user/new", map[string]any{"user_id": id, "user_role": role, "auto_create_key": false})
	}
	e.master("POST", "/team/new", map[string]any{"team_id": "t1", "max_budget": 100, "members_with_roles": []map[string]any{
		{"user_id": "u-member", "role": "user"}, {"user_id": "u-tadmin", "role": "admin"}}})
	e.master("POST", "/team/new", map[string]any{"team_id": "t2", "members_with_roles": []map[string]any{{"user_id": "u-other", "role": "admin"}}})
	e.master("POST", "/team/new", map[string]any{"team_id": "t3", "members_with_roles": []map[string]any{
		{"user_id": "u-iu", "role": "user"}, {"user_id": "u-iuv", "role": "user"}}})
	e.other.user, e.other.team = "u-other", "t2"
	e.ps = []rolePrincipal{
		{name: "no key", own: "t1"},
		{name: "malformed", key: "sk-this-key-does-not-exist", own: "t1"},
		{name: "plain key", key: e.key("", ""), own: "t1"},
		{name: "team member", key: e.key("u-member", "t1"), user: "u-member", team: "t1", own: "t1"},
		{name: "team admin", key: e.key("u-tadmin", "t1"), user: "u-tadmin", team: "t1", own: "t1"},
		{name: "internal_user", key: e.key("u-iu", ""), user: "u-iu", own: "t3"},
		{name: "internal_user_viewer", key: e.key("u-iuv", ""), user: "u-iuv", own: "t3"},
		{name: "proxy_admin_viewer", key: e.key("u-pav", ""), user: "u-pav", own: "t1"},
		{name: "proxy_admin user", key: e.key("u-pa", ""), user: "u-pa", own: "t1", admin: true},
		{name: "master", key: MasterKey, own: "t1", admin: true},
	}
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" applied the fixtures", func() bool {
			st, _ := g.DoKey(t, e.ps[len(e.ps)-2].key, "GET", "/team/info?team_id=t3", nil)
			return st == 200
		})
	}

	// ownKey is a fresh key of p's own (its user's and team's; the plain key's own is itself
	// when asked to read, else a fresh key without owners); otherKey a fresh key of u-other in t2
	ownKey := func(e *roleEnv, p rolePrincipal) string {
		if p.user == "" && p.key != "" && p.key != MasterKey {
			return p.key
		}
		return e.key(p.user, p.team)
	}
	otherKey := func(e *roleEnv, _ rolePrincipal) string { return e.key(e.other.user, e.other.team) }
	keyWrite := func(method, path string, field string, k func(*roleEnv, rolePrincipal) string, extra map[string]any) func(*roleEnv, rolePrincipal) roleReq {
		return func(e *roleEnv, p rolePrincipal) roleReq {
			key := k(e, p)
			if key == p.key && p.user == "" && p.key != "" { // never act on the plain caller's own key itself
				key = e.key("", "")
			}
			body := map[string]any{}
			for k, v := range extra {
				body[k] = v
			}
			switch field {
			case "keys":
				body["keys"] = []string{key}
			case "path":
				return roleReq{method, "/key/" + key + "/regenerate", body}
			default:
				body["key"] = key
			}
			return roleReq{method, path, body}
		}
	}
	freshMember := func(team string) string {
		u := e.id("u-fresh")
		e.master("POST", "/team/member_add", map[string]any{"team_id": team, "member": map[string]any{"user_id": u, "role": "user"}})
		return u
	}
	userOf := func(p rolePrincipal) string {
		if p.user == "" {
			return "u-pa" // the master's "own" user: the proxy admin's
		}
		return p.user
	}
	keyVisibleOnB := func(e *roleEnv, p rolePrincipal, _ roleReq, resp map[string]any) {
		k := resp["key"].(string)
		Eventually(e.t, "B serves the key "+p.name+" made", func() bool {
			st, b := e.p.B.DoKey(e.t, k, "GET", "/key/info", nil)
			return st == 200 && strings.Contains(string(b), `"user_id"`)
		})
		st, b := e.p.B.Do(e.t, "GET", "/key/info?key="+k, nil)
		require.Equal(e.t, 200, st, "%s", b)
		if !p.admin {
			require.Equal(e.t, p.user, JSON(e.t, b)["info"].(map[string]any)["user_id"], "the key is bound to its maker's user")
		}
	}

	routes := []roleRoute{
		// keys: self-service
		{name: "GET /key/info", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"GET", "/key/info?key=" + ownKey(e, p), nil}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"GET", "/key/info?key=" + otherKey(e, p), nil}
		},
			wantOwn: "401 401 200 200 200 200 200 200 200 200", wantOth: "401 401 404 404 404 404 404 200 200 200"},
		{name: "GET /key/list", own: fixed("GET", "/key/list?size=100", nil), other: fixed("GET", "/key/list?size=100&page=1", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 200 200 200 200 200 200 200",
			after: func(e *roleEnv, p rolePrincipal, _ roleReq, resp map[string]any) {
				for _, k := range resp["keys"].([]any) {
					km := k.(map[string]any)
					if p.name != "proxy_admin_viewer" && !p.admin {
						require.NotEqual(e.t, "u-other", km["user_id"], "%s lists only its own keys", p.name)
					}
				}
			}},
		{name: "POST /key/generate", own: func(e *roleEnv, p rolePrincipal) roleReq {
			if p.team != "" && p.name == "team admin" {
				return roleReq{"POST", "/key/generate", map[string]any{"team_id": p.team}}
			}
			return roleReq{"POST", "/key/generate", map[string]any{}}
		}, other: fixed("POST", "/key/generate", map[string]any{"user_id": "u-other"}),
			wantOwn: "401 401 403 200 200 200 403 403 200 200", wantOth: "401 401 403 403 403 403 403 403 200 200", after: keyVisibleOnB},
		{name: "POST /key/update", own: keyWrite("POST", "/key/update", "key", ownKey, map[string]any{"key_alias": "renamed"}),
			other:   keyWrite("POST", "/key/update", "key", otherKey, map[string]any{"key_alias": "renamed"}),
			wantOwn: "401 401 403 200 200 200 403 403 200 200", wantOth: "401 401 403 404 404 404 403 403 200 200",
			after: func(e *roleEnv, _ rolePrincipal, r roleReq, _ map[string]any) {
				k := r.body.(map[string]any)["key"].(string)
				Eventually(e.t, "B serves the renamed key", func() bool {
					st, b := e.p.B.Do(e.t, "GET", "/key/info?key="+k, nil)
					return st == 200 && JSON(e.t, b)["info"].(map[string]any)["key_alias"] == "renamed"
				})
			}},
		{name: "POST /key/delete", own: keyWrite("POST", "/key/delete", "keys", ownKey, nil), other: keyWrite("POST", "/key/delete", "keys", otherKey, nil),
			wantOwn: "401 401 403 200 200 200 403 403 200 200", wantOth: "401 401 403 404 404 404 403 403 200 200",
			after: func(e *roleEnv, _ rolePrincipal, r roleReq, _ map[string]any) {
				k := r.body.(map[string]any)["keys"].([]string)[0]
				Eventually(e.t, "B refuses the deleted key", func() bool {
					st, _ := e.p.B.DoKey(e.t, k, "GET", "/key/info", nil)
					return st == 401
				})
			}},
		{name: "POST /key/regenerate", own: keyWrite("POST", "/key/regenerate", "key", ownKey, nil), other: keyWrite("POST", "/key/regenerate", "key", otherKey, nil),
			wantOwn: "401 401 403 200 200 200 403 403 200 200", wantOth: "401 401 403 404 404 404 403 403 200 200"},
		{name: "POST /key/:key/regenerate", own: keyWrite("POST", "", "path", ownKey, nil), other: keyWrite("POST", "", "path", otherKey, nil),
			wantOwn: "401 401 403 200 200 200 403 403 200 200", wantOth: "401 401 403 404 404 404 403 403 200 200"},
		{name: "POST /key/block", own: keyWrite("POST", "/key/block", "key", ownKey, nil), other: keyWrite("POST", "/key/block", "key", otherKey, nil),
			wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /key/unblock", own: keyWrite("POST", "/key/unblock", "key", ownKey, nil), other: keyWrite("POST", "/key/unblock", "key", otherKey, nil),
			wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "GET /spend/logs", own: fixed("GET", "/spend/logs", nil), other: fixed("GET", "/spend/logs?user_id=u-other", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 200 200 200 200 200 200 200"},

		// users
		{name: "GET /user/info", own: func(_ *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"GET", "/user/info?user_id=" + userOf(p), nil}
		},
			other:   fixed("GET", "/user/info?user_id=u-other", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 404 404 404 404 200 200 200"},
		{name: "POST /user/update", own: func(_ *roleEnv, p rolePrincipal) roleReq { // raising its own role and budget
			return roleReq{"POST", "/user/update", map[string]any{"user_id": userOf(p), "user_role": "proxy_admin", "max_budget": 1000}}
		}, other: fixed("POST", "/user/update", map[string]any{"user_id": "u-other", "max_budget": 1000}),
			wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /user/new", own: func(e *roleEnv, p rolePrincipal) roleReq { // joining a team by itself
			return roleReq{"POST", "/user/new", map[string]any{"user_id": e.id("u-new"), "teams": []string{p.own}, "auto_create_key": false}}
		}, other: func(e *roleEnv, _ rolePrincipal) roleReq {
			return roleReq{"POST", "/user/new", map[string]any{"user_id": e.id("u-new"), "teams": []string{"t2"}, "auto_create_key": false}}
		}, wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /user/delete", own: func(e *roleEnv, p rolePrincipal) roleReq {
			u := userOf(p)
			if p.admin {
				u = freshMember("t3")
			}
			return roleReq{"POST", "/user/delete", map[string]any{"user_ids": []string{u}}}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			u := "u-other"
			if p.admin {
				u = freshMember("t2")
			}
			return roleReq{"POST", "/user/delete", map[string]any{"user_ids": []string{u}}}
		}, wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "GET /user/list", own: fixed("GET", "/user/list", nil), other: fixed("GET", "/user/list?user_ids=u-other", nil), wantOwn: adminRead(200), wantOth: adminRead(200)},

		// teams
		{name: "GET /team/info", own: func(_ *roleEnv, p rolePrincipal) roleReq { return roleReq{"GET", "/team/info?team_id=" + p.own, nil} },
			other:   fixed("GET", "/team/info?team_id=t2", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 404 404 404 404 200 200 200"},
		{name: "GET /team/list", own: fixed("GET", "/team/list", nil), other: fixed("GET", "/team/list?user_id=u-other", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 200 200 200 200 200 200 200",
		},
		{name: "GET /v2/team/list", own: fixed("GET", "/v2/team/list", nil), other: fixed("GET", "/v2/team/list?team_id=t2", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 200 200 200 200 200 200 200",
			after: func(e *roleEnv, p rolePrincipal, _ roleReq, resp map[string]any) {
				for _, tm := range resp["teams"].([]any) {
					if !p.admin && p.name != "proxy_admin_viewer" {
						require.NotEqual(e.t, "t2", tm.(map[string]any)["team_id"], "%s lists only its teams", p.name)
					}
				}
			}},
		{name: "POST /team/new", own: func(_ *roleEnv, p rolePrincipal) roleReq { // a team of its own, itself its admin
			return roleReq{"POST", "/team/new", map[string]any{"members_with_roles": []map[string]any{{"user_id": userOf(p), "role": "admin"}}}}
		}, other: fixed("POST", "/team/new", map[string]any{}), wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /team/update", own: func(_ *roleEnv, p rolePrincipal) roleReq { // raising its own team's budget
			return roleReq{"POST", "/team/update", map[string]any{"team_id": p.own, "max_budget": 100}}
		}, other: fixed("POST", "/team/update", map[string]any{"team_id": "t2", "max_budget": 1000}), wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /team/block", own: fixed("POST", "/team/block", map[string]any{"team_id": "t-ghost"}), other: fixed("POST", "/team/block", map[string]any{"team_id": "t-ghost"}),
			wantOwn: adminWrite(404), wantOth: adminWrite(404)},
		{name: "POST /team/unblock", own: fixed("POST", "/team/unblock", map[string]any{"team_id": "t2"}), other: fixed("POST", "/team/unblock", map[string]any{"team_id": "t2"}),
			wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /team/delete", own: func(e *roleEnv, p rolePrincipal) roleReq {
			id := p.own
			if p.admin {
				id = e.master("POST", "/team/new", map[string]any{})["team_id"].(string)
			}
			return roleReq{"POST", "/team/delete", map[string]any{"team_ids": []string{id}}}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			id := "t2"
			if p.admin {
				id = e.master("POST", "/team/new", map[string]any{})["team_id"].(string)
			}
			return roleReq{"POST", "/team/delete", map[string]any{"team_ids": []string{id}}}
		}, wantOwn: adminWrite(200), wantOth: adminWrite(200)},
		{name: "POST /team/member_add", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/team/member_add", map[string]any{"team_id": p.own, "member": map[string]any{"user_id": e.id("u-added"), "role": "user"}}}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/team/member_add", map[string]any{"team_id": "t2", "member": map[string]any{"user_id": e.id("u-added"), "role": "user"}}}
		}, wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 404 403 403 403 200 200",
			after: func(e *roleEnv, _ rolePrincipal, r roleReq, _ map[string]any) {
				b := r.body.(map[string]any)
				uid := b["member"].(map[string]any)["user_id"].(string)
				Eventually(e.t, "B lists the added member", func() bool {
					st, body := e.p.B.Do(e.t, "GET", "/team/info?team_id="+b["team_id"].(string), nil)
					return st == 200 && strings.Contains(string(body), uid)
				})
			}},
		{name: "POST /team/member_update", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/team/member_update", map[string]any{"team_id": p.own, "user_id": freshMember(p.own), "role": "admin"}}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/team/member_update", map[string]any{"team_id": "t2", "user_id": freshMember("t2"), "role": "admin"}}
		}, wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 404 403 403 403 200 200"},
		{name: "POST /team/member_delete", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/team/member_delete", map[string]any{"team_id": p.own, "user_id": freshMember(p.own)}}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/team/member_delete", map[string]any{"team_id": "t2", "user_id": freshMember("t2")}}
		}, wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 404 403 403 403 200 200"},
	}
	// models: a team admin manages its team's (model_info.team_id)
	teamModel := func(e *roleEnv, team string) string {
		return e.master("POST", "/model/new", map[string]any{"model_name": e.id("m"), "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
			"model_info": map[string]any{"team_id": team}})["model_info"].(map[string]any)["id"].(string)
	}
	modelNew := func(team string) func(*roleEnv, rolePrincipal) roleReq {
		return func(e *roleEnv, p rolePrincipal) roleReq {
			if team == "" {
				team = p.own
			}
			return roleReq{"POST", "/model/new", map[string]any{"model_name": e.id("m-new"), "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
				"model_info": map[string]any{"team_id": team}}}
		}
	}
	modelEdit := func(kind, team string) func(*roleEnv, rolePrincipal) roleReq {
		return func(e *roleEnv, p rolePrincipal) roleReq {
			t := team
			if t == "" {
				t = p.own
			}
			id := teamModel(e, t)
			switch kind {
			case "update":
				return roleReq{"POST", "/model/update", map[string]any{"model_info": map[string]any{"id": id, "note": "edited"}}}
			case "patch":
				return roleReq{"PATCH", "/model/" + id + "/update", map[string]any{"model_info": map[string]any{"note": "edited"}}}
			}
			return roleReq{"POST", "/model/delete", map[string]any{"id": id}}
		}
	}
	routes = append(routes,
		roleRoute{name: "POST /model/new", own: modelNew(""), other: modelNew("t2"),
			wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 403 403 403 403 200 200",
			after: func(e *roleEnv, _ rolePrincipal, r roleReq, _ map[string]any) {
				name := r.body.(map[string]any)["model_name"].(string)
				Eventually(e.t, "B serves the new model", func() bool {
					st, b := e.p.B.Do(e.t, "GET", "/model/info", nil)
					return st == 200 && strings.Contains(string(b), name)
				})
			}},
		roleRoute{name: "POST /model/update", own: modelEdit("update", ""), other: modelEdit("update", "t2"),
			wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 404 403 403 403 200 200"},
		roleRoute{name: "PATCH /model/:id/update", own: modelEdit("patch", ""), other: modelEdit("patch", "t2"),
			wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 404 403 403 403 200 200"},
		roleRoute{name: "POST /model/delete", own: modelEdit("delete", ""), other: modelEdit("delete", "t2"),
			wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 404 403 403 403 200 200"},
	)
	// the routes only the proxy admin may call (reads: proxy_admin_viewer too), aimed at
	// objects that do not exist or with bodies the admin's call is refused for, so that no
	// call changes anything: the admin's status shows the call passed the roles table
	ghost := func(name, method, path string, body any, write bool, status int) roleRoute {
		r := roleRoute{name: name}
		r.own, r.other = same(fixed(method, path, body))
		if write {
			r.wantOwn, r.wantOth = adminWrite(status), adminWrite(status)
		} else {
			r.wantOwn, r.wantOth = adminRead(status), adminRead(status)
		}
		return r
	}
	routes = append(routes,
		ghost("GET /health", "GET", "/health", nil, false, 200),
		ghost("POST /organization/new", "POST", "/organization/new", map[string]any{"organization_id": "o-1", "max_budget": -1}, true, 400),
		ghost("PATCH /organization/update", "PATCH", "/organization/update", map[string]any{"organization_id": "o-ghost", "max_budget": 1}, true, 404),
		ghost("POST /organization/update", "POST", "/organization/update", map[string]any{"organization_id": "o-ghost", "max_budget": 1}, true, 404),
		ghost("GET /organization/info", "GET", "/organization/info?organization_id=o-ghost", nil, false, 404),
		ghost("DELETE /organization/delete", "DELETE", "/organization/delete", map[string]any{"organization_ids": []string{"o-ghost"}}, true, 404),
		ghost("POST /organization/delete", "POST", "/organization/delete", map[string]any{"organization_ids": []string{"o-ghost"}}, true, 404),
		ghost("GET /organization/list", "GET", "/organization/list", nil, false, 200),
		ghost("POST /access_group/new", "POST", "/access_group/new", map[string]any{"access_group": "g", "model_names": []string{"m-ghost"}}, true, 400),
		ghost("GET /access_group/list", "GET", "/access_group/list", nil, false, 200),
		ghost("GET /access_group/:group/info", "GET", "/access_group/g-ghost/info", nil, false, 404),
		ghost("PUT /access_group/:group/update", "PUT", "/access_group/g-ghost/update", map[string]any{"model_names": []string{"m-ghost"}}, true, 404),
		ghost("DELETE /access_group/:group/delete", "DELETE", "/access_group/g-ghost/delete", nil, true, 404),
		ghost("POST /guardrails", "POST", "/guardrails", map[string]any{}, true, 400),
		ghost("GET /guardrails/list", "GET", "/guardrails/list", nil, false, 200),
		ghost("GET /v2/guardrails/list", "GET", "/v2/guardrails/list", nil, false, 200),
		ghost("GET /guardrails/:id", "GET", "/guardrails/g-ghost", nil, false, 404),
		ghost("GET /guardrails/:id/info", "GET", "/guardrails/g-ghost/info", nil, false, 404),
		ghost("PUT /guardrails/:id", "PUT", "/guardrails/g-ghost", map[string]any{}, true, 400),
		ghost("PATCH /guardrails/:id", "PATCH", "/guardrails/g-ghost", map[string]any{"guardrail": map[string]any{}}, true, 404),
		ghost("DELETE /guardrails/:id", "DELETE", "/guardrails/g-ghost", nil, true, 404),
		ghost("POST /v1/agents", "POST", "/v1/agents", map[string]any{}, true, 400),
		ghost("GET /v1/agents", "GET", "/v1/agents", nil, false, 200),
		ghost("GET /v1/agents/:id", "GET", "/v1/agents/a-ghost", nil, false, 404),
		ghost("PUT /v1/agents/:id", "PUT", "/v1/agents/a-ghost", map[string]any{}, true, 404),
		ghost("PATCH /v1/agents/:id", "PATCH", "/v1/agents/a-ghost", map[string]any{}, true, 404),
		ghost("DELETE /v1/agents/:id", "DELETE", "/v1/agents/a-ghost", nil, true, 404),
		// budgets (issue 19 item 9): admin objects, proxy_admin_viewer reads (/budget/info is
		// a read sent as POST)
		ghost("POST /budget/new", "POST", "/budget/new", map[string]any{"budget_id": "b-1", "max_budget": -1}, true, 400),
		ghost("POST /budget/update", "POST", "/budget/update", map[string]any{"budget_id": "b-ghost", "rpm_limit": 1}, true, 404),
		ghost("POST /budget/info", "POST", "/budget/info", map[string]any{"budgets": []string{"b-ghost"}}, false, 200),
		ghost("GET /budget/list", "GET", "/budget/list", nil, false, 200),
		ghost("GET /budget/settings", "GET", "/budget/settings?budget_id=b-ghost", nil, false, 200),
		ghost("POST /budget/delete", "POST", "/budget/delete", map[string]any{"id": "b-ghost"}, true, 404),
		// projects (issue 19, LiteLLM project_endpoints.py): removing needs the proxy admin
		ghost("DELETE /project/delete", "DELETE", "/project/delete", map[string]any{"project_ids": []string{"p-ghost"}}, true, 404),
		// guardrail policies (issue 19): admin objects, proxy_admin_viewer reads
		ghost("POST /policies", "POST", "/policies", map[string]any{"policy_name": "p-1", "guardrails_add": []string{"g-ghost"}}, true, 400),
		ghost("GET /policies/list", "GET", "/policies/list", nil, false, 200),
		ghost("GET /policies/:policy_id", "GET", "/policies/p-ghost", nil, false, 404),
		ghost("PUT /policies/:policy_id", "PUT", "/policies/p-ghost", map[string]any{"description": "x"}, true, 404),
		ghost("DELETE /policies/:policy_id", "DELETE", "/policies/p-ghost", nil, true, 404),
		ghost("GET /policies/:policy_id/resolved-guardrails", "GET", "/policies/p-ghost/resolved-guardrails", nil, false, 404),
		// policy attachments (issue 19): admin objects, proxy_admin_viewer reads
		ghost("POST /policies/attachments", "POST", "/policies/attachments", map[string]any{"policy_name": "p-ghost", "scope": "*"}, true, 404),
		ghost("GET /policies/attachments/list", "GET", "/policies/attachments/list", nil, false, 200),
		ghost("GET /policies/attachments/:attachment_id", "GET", "/policies/attachments/a-ghost", nil, false, 404),
		ghost("DELETE /policies/attachments/:attachment_id", "DELETE", "/policies/attachments/a-ghost", nil, true, 404),
	)
	// unified access groups (LiteLLM access_group_endpoints.py: _require_proxy_admin writes,
	// _require_admin_view reads), under both of LiteLLM's paths
	for _, pre := range []string{"/v1/access_group", "/v1/unified_access_group"} {
		routes = append(routes,
			ghost("POST "+pre, "POST", pre, map[string]any{"access_group_name": " "}, true, 400),
			ghost("GET "+pre, "GET", pre, nil, false, 200),
			ghost("GET "+pre+"/:id", "GET", pre+"/ag-ghost", nil, false, 404),
			ghost("PUT "+pre+"/:id", "PUT", pre+"/ag-ghost", map[string]any{"description": "x"}, true, 404),
			ghost("DELETE "+pre+"/:id", "DELETE", pre+"/ag-ghost", nil, true, 404),
		)
	}
	for _, pre := range []string{"/customer", "/end_user"} {
		routes = append(routes,
			ghost("POST "+pre+"/new", "POST", pre+"/new", map[string]any{"user_id": "c-1", "max_budget": -1}, true, 400),
			ghost("POST "+pre+"/update", "POST", pre+"/update", map[string]any{"user_id": "c-ghost", "max_budget": 1}, true, 404),
			ghost("GET "+pre+"/info", "GET", pre+"/info?end_user_id=c-ghost", nil, false, 404),
			ghost("POST "+pre+"/delete", "POST", pre+"/delete", map[string]any{"user_ids": []string{"c-ghost"}}, true, 404),
			ghost("GET "+pre+"/list", "GET", pre+"/list", nil, false, 200),
			ghost("POST "+pre+"/block", "POST", pre+"/block", map[string]any{"user_ids": []string{"c-ghost"}}, true, 404),
			ghost("POST "+pre+"/unblock", "POST", pre+"/unblock", map[string]any{"user_ids": []string{"c-ghost"}}, true, 404),
		)
	}

	// projects (LiteLLM _check_user_permission_for_project): the team admin creates and
	// updates its own team's (another team's: 403, LiteLLM's refusal); a member of the key's
	// team reads that team's (another's answers 404 as an absent one); a caller whose key has
	// no team lists none
	teamProject := func(team string) string {
		id := e.id("pr")
		e.master("POST", "/project/new", map[string]any{"project_id": id, "team_id": team})
		return id
	}
	projectOnB := func(e *roleEnv, _ rolePrincipal, _ roleReq, resp map[string]any) {
		id := resp["project_id"].(string)
		Eventually(e.t, "B reads the project", func() bool {
			st, _ := e.p.B.Do(e.t, "GET", "/project/info?project_id="+id, nil)
			return st == 200
		})
	}
	routes = append(routes,
		roleRoute{name: "POST /project/new", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/project/new", map[string]any{"team_id": p.own}}
		}, other: fixed("POST", "/project/new", map[string]any{"team_id": "t2"}),
			wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 403 403 403 403 200 200", after: projectOnB},
		roleRoute{name: "POST /project/update", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/project/update", map[string]any{"project_id": teamProject(p.own), "description": "changed"}}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"POST", "/project/update", map[string]any{"project_id": teamProject("t2"), "description": "changed"}}
		}, wantOwn: "401 401 403 403 200 403 403 403 200 200", wantOth: "401 401 403 403 403 403 403 403 200 200", after: projectOnB},
		roleRoute{name: "GET /project/info", own: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"GET", "/project/info?project_id=" + teamProject(p.own), nil}
		}, other: func(e *roleEnv, p rolePrincipal) roleReq {
			return roleReq{"GET", "/project/info?project_id=" + teamProject("t2"), nil}
		}, wantOwn: "401 401 403 200 200 404 404 200 200 200", wantOth: "401 401 403 404 404 404 404 200 200 200"},
		roleRoute{name: "GET /project/list", own: fixed("GET", "/project/list", nil), other: fixed("GET", "/project/list", nil),
			wantOwn: "401 401 403 200 200 200 200 200 200 200", wantOth: "401 401 403 200 200 200 200 200 200 200"},
	)

	// spend reports (issue 19 item 10), LiteLLM's route lists: an internal user reads its
	// own user's on its internal_user_routes, an internal_user_viewer on its view-only routes
	// (which add /global/spend/logs), a plain key none, proxy_admin_viewer every one; the
	// proxy-wide ones are the proxy admin's
	ownSpend := "401 401 403 200 200 200 200 200 200 200"
	today := time.Now().UTC().Format("2006-01-02")
	dates := "?start_date=" + today + "&end_date=" + today
	spendRow := func(method, path string, body any, want string) roleRoute {
		return roleRoute{name: method + " " + strings.Split(path, "?")[0], own: fixed(method, path, body),
			other: func(e *roleEnv, p rolePrincipal) roleReq {
				sep := "?"
				if strings.Contains(path, "?") {
					sep = "&"
				}
				return roleReq{method, path + sep + "api_key=" + otherKey(e, p), body}
			}, wantOwn: want, wantOth: want}
	}
	for _, path := range []string{"/global/spend/keys", "/global/spend/models", "/global/spend/provider" + dates,
		"/global/activity" + dates, "/global/activity/model" + dates, "/global/spend/tags" + dates, "/spend/tags"} {
		routes = append(routes, spendRow("GET", path, nil, ownSpend))
	}
	routes = append(routes,
		spendRow("GET", "/global/spend/logs", nil, "401 401 403 403 403 403 200 200 200 200"),
		spendRow("POST", "/global/spend/end_users", map[string]any{}, ownSpend),
		ghost("GET /global/spend", "GET", "/global/spend", nil, false, 200),
		ghost("GET /global/spend/teams", "GET", "/global/spend/teams", nil, false, 200),
		ghost("GET /global/spend/report", "GET", "/global/spend/report", nil, false, 400),
		ghost("GET /global/all_end_users", "GET", "/global/all_end_users", nil, false, 200),
		ghost("GET /global/spend/all_tag_names", "GET", "/global/spend/all_tag_names", nil, false, 200),
		ghost("POST /global/spend/reset", "POST", "/global/spend/reset", nil, true, 200),
	)

	var failures []string
	for _, r := range routes {
		for _, side := range []string{"own", "other"} {
			build, want := r.own, strings.Fields(r.wantOwn)
			if side == "other" {
				build, want = r.other, strings.Fields(r.wantOth)
			}
			require.Len(t, want, len(e.ps), r.name)
			for i, pr := range e.ps {
				req := build(e, pr)
				before := e.fingerprint()
				st, b := p.A.DoKey(t, pr.key, req.method, req.path, req.body)
				if fmt.Sprint(st) != want[i] {
					failures = append(failures, fmt.Sprintf("%s (%s object) as %s: %d, want %s: %s", r.name, side, pr.name, st, want[i], b))
					continue
				}
				if st >= 400 {
					if after := e.fingerprint(); after != before {
						failures = append(failures, fmt.Sprintf("%s (%s object) as %s: refused %d but the database changed (%s -> %s)", r.name, side, pr.name, st, before, after))
					}
					if st == 403 || st == 401 {
						require.NotEmpty(t, refusalText(b), "%s as %s: %s", r.name, pr.name, b)
					}
					continue
				}
				if r.after != nil {
					r.after(e, pr, req, JSON(t, b))
				}
			}
		}
	}
	require.Empty(t, failures, "\n%s", strings.Join(failures, "\n"))
}

// refusalText is the message of an error answer in either envelope.
func refusalText(b []byte) string {
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	if d, ok := m["detail"].(map[string]any); ok {
		s, _ := d["error"].(string)
		return s
	}
	if e, ok := m["error"].(map[string]any); ok {
		s, _ := e["message"].(string)
		return s
	}
	return ""
}

// TestRolesSelfServiceLimits: an internal_user's own key is bound to its user and capped by
// the user's own limits (a higher budget or rpm_limit is refused 403, nothing written); a team
// admin's team keys and member budgets are capped by the team's; nobody changes its own role
// or budget in a team; a team admin's models are its team's, under names no other model
// serves. Writes on A, effects on B.
func TestRolesSelfServiceLimits(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	conn, err := pgx.Connect(context.Background(), p.DB)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	e := &roleEnv{t: t, p: p, conn: conn}
	e.master("POST", "/user/new", map[string]any{"user_id": "cap-user", "user_role": "internal_user", "max_budget": 10, "rpm_limit": 5, "auto_create_key": false})
	e.master("POST", "/user/new", map[string]any{"user_id": "cap-admin", "user_role": "internal_user", "auto_create_key": false})
	e.master("POST", "/team/new", map[string]any{"team_id": "cap-team", "max_budget": 50, "tpm_limit": 1000,
		"members_with_roles": []map[string]any{{"user_id": "cap-admin", "role": "admin"}}})
	uk := e.key("cap-user", "")
	ak := e.key("cap-admin", "cap-team")
	refused := func(key, path string, body map[string]any, text string) {
		t.Helper()
		before := e.fingerprint()
		st, b := p.A.DoKey(t, key, "POST", path, body)
		require.Equal(t, 403, st, "%s %v: %s", path, body, b)
		require.Equal(t, text, refusalText(b), "%s", b)
		require.Equal(t, before, e.fingerprint(), "nothing written")
	}
	refused(uk, "/key/generate", map[string]any{"max_budget": 11}, "max_budget higher than user max_budget. User max_budget=10. Key max_budget=11")
	refused(uk, "/key/generate", map[string]any{"rpm_limit": 6}, "rpm_limit higher than user rpm_limit. User rpm_limit=5. Key rpm_limit=6")
	refused(uk, "/key/generate", map[string]any{"user_id": "cap-admin"}, "User can only create keys for themselves. Got user_id=cap-admin, Your ID=cap-user")
	refused(uk, "/key/generate", map[string]any{"team_id": "cap-team"}, "User can only create keys for their own team. Got=cap-team, Your Team ID=")
	refused(ak, "/key/generate", map[string]any{"team_id": "cap-team", "max_budget": 51}, "max_budget higher than team max_budget. Team max_budget=50. Key max_budget=51")
	refused(ak, "/team/member_update", map[string]any{"team_id": "cap-team", "user_id": "cap-admin", "max_budget_in_team": 1}, "a team admin cannot change its own role, budget or limits in the team")
	e.master("POST", "/model/new", map[string]any{"model_name": "cap-public", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
	Eventually(t, "A serves cap-public", func() bool {
		st, b := p.A.Do(t, "GET", "/model/info", nil)
		return st == 200 && strings.Contains(string(b), "cap-public")
	})
	refused(ak, "/model/new", map[string]any{"model_name": "cap-public", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "mine"}},
		"model_name cap-public is served by models outside team cap-team: a team admin names its team's models apart")
	refused(ak, "/model/new", map[string]any{"model_name": "cap-mine", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "mine"}, "model_info": map[string]any{"team_id": "other"}},
		"a team admin adds models to its own team only: model_info.team_id must be cap-team")
	refused(ak, "/team/member_add", map[string]any{"team_id": "cap-team", "member": map[string]any{"user_id": "cap-new", "role": "user"}, "max_budget_in_team": 60},
		"max_budget_in_team higher than team max_budget. Team max_budget=50. max_budget_in_team=60")

	// within the limits: made on A, bound to the caller's user, served on B
	st, b := p.A.DoKey(t, uk, "POST", "/key/generate", map[string]any{"max_budget": 10, "rpm_limit": 5})
	require.Equal(t, 200, st, "%s", b)
	k := JSON(t, b)["key"].(string)
	Eventually(t, "B serves the self-made key", func() bool {
		st, b := p.B.DoKey(t, k, "GET", "/key/info", nil)
		return st == 200 && JSON(t, b)["info"].(map[string]any)["user_id"] == "cap-user"
	})
	st, b = p.A.DoKey(t, ak, "POST", "/team/member_add", map[string]any{"team_id": "cap-team", "member": map[string]any{"user_id": "cap-new", "role": "user"}, "max_budget_in_team": 50})
	require.Equal(t, 200, st, "%s", b)
	Eventually(t, "B sees the member the team admin added", func() bool {
		st, b := p.B.DoKey(t, ak, "GET", "/team/info?team_id=cap-team", nil)
		return st == 200 && strings.Contains(string(b), "cap-new")
	})
	// the internal user's own info, without naming itself, on B
	st, b = p.B.DoKey(t, uk, "GET", "/user/info", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "cap-user", JSON(t, b)["user_id"])
}

// TestTeamNewSameNewMemberRace: 10, then 50 parallel /team/new naming the same new member,
// half by user_email and half by user_id, half on each replica: 0 errors, one user made for
// the id and one for the email, and every team lists its member.
func TestTeamNewSameNewMemberRace(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	for _, n := range []int{10, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			uid, email := fmt.Sprintf("race-member-%d", n), fmt.Sprintf("race%d@example.com", n)
			var wg sync.WaitGroup
			errs := make(chan string, n)
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					g := p.A
					if i%2 == 1 {
						g = p.B
					}
					member := map[string]any{"user_id": uid, "role": "user"}
					if i%4 >= 2 {
						member = map[string]any{"user_email": email, "role": "user"}
					}
					st, b := g.Do(t, "POST", "/team/new", map[string]any{"members_with_roles": []any{member}})
					if st != 200 {
						errs <- fmt.Sprintf("%d: %s", st, b)
					}
				}(i)
			}
			wg.Wait()
			close(errs)
			var all []string
			for e := range errs {
				all = append(all, e)
			}
			require.Empty(t, all, "0 errors")
			st, b := p.A.Do(t, "GET", "/user/list?user_email="+email, nil)
			require.Equal(t, 200, st, "%s", b)
			require.EqualValues(t, 1, JSON(t, b)["total"], "one user for the email: %s", b)
			st, b = p.B.Do(t, "GET", "/user/info?user_id="+uid, nil)
			require.Equal(t, 200, st, "%s", b)
			byID := 0
			for i := 0; i < n; i++ {
				if i%4 < 2 {
					byID++
				}
			}
			require.Len(t, JSON(t, b)["teams"], byID, "the member by id is in every team naming it")
		})
	}
}
