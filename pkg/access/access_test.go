package access

import "testing"

// LiteLLM's route matching (route_checks.py), case by case.
func TestRouteAllowed(t *testing.T) {
	for _, c := range []struct {
		allowed []string
		route   string
		want    bool
	}{
		{nil, "/key/generate", true},
		{[]string{}, "/key/generate", true},
		{[]string{"/chat/completions"}, "/chat/completions", true},
		{[]string{"/chat/completions"}, "/v1/chat/completions", false},
		{[]string{"/chat"}, "/chat/completions", true}, // a path prefix
		{[]string{"/chat"}, "/chatx", false},           // not a path prefix
		{[]string{"/v1/*"}, "/v1/embeddings", true},    // a "*" pattern
		{[]string{"llm_api_routes"}, "/v1/chat/completions", true},
		{[]string{"llm_api_routes"}, "/messages", true},       // lockstep's Messages alias
		{[]string{"llm_api_routes"}, "/a2a/agent-1", true},    // {agent_id}
		{[]string{"llm_api_routes"}, "/a2a/agent-1/x", false}, // one segment
		{[]string{"llm_api_routes"}, "/openai/deployments/gpt-4/chat/completions", true},
		{[]string{"llm_api_routes"}, "/key/generate", false},
		{[]string{"llm_api_routes"}, "/v1beta/models/gemini-pro:generateContent", true},
		{[]string{"management_routes"}, "/key/generate", true},
		{[]string{"management_routes"}, "/chat/completions", false},
		{[]string{"info_routes"}, "/key/info", true},
		{[]string{"info_routes"}, "/key/generate", false},
		{[]string{"info_routes"}, "/v1/models", true},
		{[]string{"no_such_group"}, "/chat/completions", false},
	} {
		if got := RouteAllowed(c.allowed, c.route); got != c.want {
			t.Errorf("RouteAllowed(%q, %q) = %v, want %v", c.allowed, c.route, got, c.want)
		}
	}
}

func TestRouteRefusal(t *testing.T) {
	want := "Virtual key is not allowed to call this route. Only allowed to call routes: ['llm_api_routes']. Tried to call route: /key/generate"
	if got := RouteRefusal([]string{"llm_api_routes"}, "/key/generate"); got != want {
		t.Fatalf("got %q", got)
	}
}

func TestKeyTypeRoutes(t *testing.T) {
	for kt, want := range map[string]string{"llm_api": "llm_api_routes", "management": "management_routes", "read_only": "info_routes"} {
		if r, ok := KeyTypeRoutes(kt); !ok || len(r) != 1 || r[0] != want {
			t.Errorf("%s: %v %v", kt, r, ok)
		}
	}
	if r, ok := KeyTypeRoutes("default"); !ok || r != nil {
		t.Errorf("default: %v %v", r, ok)
	}
	if _, ok := KeyTypeRoutes("admin"); ok {
		t.Error("admin accepted")
	}
}

// LiteLLM's agent permission table (a2a_agent_permissions.md "How it works").
func TestAgentAllowed(t *testing.T) {
	for _, c := range []struct {
		key, team []string
		want      bool
	}{
		{nil, nil, true},
		{[]string{"a1"}, nil, true},
		{[]string{"a2"}, nil, false},
		{nil, []string{"a1"}, true},
		{nil, []string{"a2"}, false},
		{[]string{"a1", "a2"}, []string{"a1"}, true},
		{[]string{"a2"}, []string{"a1", "a2"}, false},
		{[]string{"support"}, nil, true}, // by name
	} {
		grant := func(l []string) AgentGrant { return AgentGrant{Restricted: len(l) > 0, Agents: l} }
		if got := AgentAllowed(grant(c.key), grant(c.team), "a1", "support"); got != c.want {
			t.Errorf("key %v team %v: %v, want %v", c.key, c.team, got, c.want)
		}
	}
}

// Unified access groups grant agents by id; a key naming a group is restricted even when the
// group grants none (LiteLLM AgentRequestHandler).
func TestAgentAllowedGroups(t *testing.T) {
	for _, c := range []struct {
		key  AgentGrant
		want bool
	}{
		{AgentGrant{Restricted: true, GroupIDs: []string{"a1"}}, true},
		{AgentGrant{Restricted: true, GroupIDs: []string{"support"}}, false}, // groups match ids only
		{AgentGrant{Restricted: true}, false},                                // a group with no agents
		{AgentGrant{Restricted: true, Agents: []string{"x"}, GroupIDs: []string{"a1"}}, true},
	} {
		if got := AgentAllowed(c.key, AgentGrant{}, "a1", "support"); got != c.want {
			t.Errorf("key %+v: %v, want %v", c.key, got, c.want)
		}
	}
}

func TestCheckObjectPermission(t *testing.T) {
	for raw, ok := range map[string]bool{
		`null`: true, `{"agents": ["a"]}`: true, `{"mcp_servers": ["s"], "vector_stores": []}`: true,
		`{"models": []}`: true, `{"agents": "a"}`: false, `{"agentz": []}`: false, `[]`: false,
	} {
		if err := CheckObjectPermission([]byte(raw)); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
	if _, ny := CheckObjectPermission([]byte(`{"models": ["m"]}`)).(*NotYetError); !ny {
		t.Error("models: want NotYetError")
	}
}

// The stored members are typed as LiteLLM_ObjectPermissionBase types them (lists of strings,
// mcp_tool_permissions an object of string lists, mcp_tool_search_enabled a boolean): a value
// of another type is refused naming the member, not stored and returned as sent.
func TestCheckObjectPermissionStoredTypes(t *testing.T) {
	for raw, want := range map[string]string{
		`{"mcp_servers": "x"}`:                       "object_permission.mcp_servers must be a list of strings",
		`{"vector_stores": 7}`:                       "object_permission.vector_stores must be a list of strings",
		`{"mcp_access_groups": [1]}`:                 "object_permission.mcp_access_groups must be a list of strings",
		`{"search_tools": {"a": 1}}`:                 "object_permission.search_tools must be a list of strings",
		`{"mcp_toolsets": true}`:                     "object_permission.mcp_toolsets must be a list of strings",
		`{"mcp_tool_permissions": ["t"]}`:            "object_permission.mcp_tool_permissions must be an object of lists of strings",
		`{"mcp_tool_permissions": {"s": "t"}}`:       "object_permission.mcp_tool_permissions must be an object of lists of strings",
		`{"mcp_tool_search_enabled": "yes"}`:         "object_permission.mcp_tool_search_enabled must be true or false",
		`{"mcp_servers": ["s"], "vector_stores": 3}`: "object_permission.vector_stores must be a list of strings",
	} {
		err := CheckObjectPermission([]byte(raw))
		if err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %q", raw, err, want)
		}
	}
	for _, raw := range []string{
		`{"mcp_servers": null, "vector_stores": [], "search_tools": ["s"], "mcp_toolsets": ["t"]}`,
		`{"mcp_tool_permissions": {"srv": ["t1", "t2"]}, "mcp_tool_search_enabled": true}`,
		`{"mcp_tool_permissions": null, "mcp_tool_search_enabled": null}`,
	} {
		if err := CheckObjectPermission([]byte(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
