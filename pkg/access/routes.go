// Package access holds LiteLLM's per-key route and object restrictions as lockstep enforces
// them on every replica: a virtual key's allowed_routes (and the key_type that sets them),
// its object_permission.agents (with its team's), and the route groups LiteLLM lets a key name.
//
// Source: LiteLLM litellm/proxy/auth/route_checks.py (RouteChecks.is_virtual_key_allowed_to_call_route,
// _route_matches_allowed_route, _route_matches_wildcard_pattern, check_route_access,
// _route_matches_pattern), litellm/proxy/_types.py (LiteLLMRoutes, LiteLLMKeyType),
// management_endpoints/key_management_endpoints.py (handle_key_type) and
// docs/my-website/docs/a2a_agent_permissions.md, read at BerriAI/litellm commit
// 00145f91a8cbcac1f181228efe7acd0cfa71a731.
package access

import (
	"fmt"
	"slices"
	"strings"
)

// LiteLLM's key types (LiteLLMKeyType) and the allowed_routes /key/generate gives each
// (handle_key_type); KeyTypeDefault sets none.
const (
	KeyTypeLLMAPI     = "llm_api"
	KeyTypeManagement = "management"
	KeyTypeReadOnly   = "read_only"
	KeyTypeDefault    = "default"
)

// KeyTypeRoutes is the allowed_routes a key_type stands for: ["llm_api_routes"],
// ["management_routes"], ["info_routes"]; nil for "default" (every route the key's role
// allows). ok is false for a name LiteLLM does not define.
func KeyTypeRoutes(keyType string) (routes []string, ok bool) {
	switch keyType {
	case KeyTypeLLMAPI:
		return []string{"llm_api_routes"}, true
	case KeyTypeManagement:
		return []string{"management_routes"}, true
	case KeyTypeReadOnly:
		return []string{"info_routes"}, true
	case KeyTypeDefault:
		return nil, true
	}
	return nil, false
}

// RouteAllowed reports whether a key whose allowed_routes is allowed may call route (the
// request's path), as LiteLLM's is_virtual_key_allowed_to_call_route decides: an empty list
// allows every route; else an entry allows the route when it is the route or a path prefix
// of it ("/chat" allows "/chat/completions", not "/chatx"), a LiteLLM route group name
// (Groups) holding the route (exactly, by a "{param}" pattern or a trailing "*"), or a
// pattern ending in "*" whose prefix starts the route.
func RouteAllowed(allowed []string, route string) bool {
	if len(allowed) == 0 {
		return true
	}
	for _, a := range allowed {
		if route == a || (strings.HasPrefix(route, a) && strings.HasPrefix(route[len(a):], "/")) {
			return true
		}
	}
	for _, a := range allowed {
		if g, ok := Groups[a]; ok && inGroup(g, route) {
			return true
		}
	}
	for _, a := range allowed {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(route, p) {
			return true
		}
	}
	return false
}

// RouteRefusal is LiteLLM's 403 text for a key calling a route its allowed_routes does not
// allow, the list as Python prints it:
//
//	Virtual key is not allowed to call this route. Only allowed to call routes: ['llm_api_routes']. Tried to call route: /key/generate
func RouteRefusal(allowed []string, route string) string {
	return fmt.Sprintf("Virtual key is not allowed to call this route. Only allowed to call routes: %s. Tried to call route: %s", PyList(allowed), route)
}

// PyList renders a list of strings as Python prints it (['a', 'b']), as LiteLLM's messages do.
func PyList(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	b.WriteByte(']')
	return b.String()
}

// inGroup is LiteLLM's check_route_access: route is in group exactly, under a pattern ending
// in "*", or matches a "{param}" pattern ("{x}" one path segment, "{x:path}" anything up to a
// ":").
func inGroup(group []string, route string) bool {
	for _, g := range group {
		switch {
		case g == route:
			return true
		case strings.HasSuffix(g, "*") && strings.HasPrefix(route, g[:len(g)-1]):
			return true
		case strings.Contains(g, "{") && matchPattern(g, route):
			return true
		}
	}
	return false
}

// matchPattern matches route against a LiteLLM route pattern with "{param}" placeholders,
// anchored at both ends.
func matchPattern(pattern, route string) bool {
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return pattern == route
		}
		if !strings.HasPrefix(route, pattern[:i]) {
			return false
		}
		route = route[i:]
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return false
		}
		name := pattern[i+1 : i+j]
		pattern = pattern[i+j+1:]
		stop := "/"
		if strings.HasSuffix(name, ":path") {
			stop = ":"
		}
		n := strings.IndexAny(route, stop)
		if n < 0 {
			n = len(route)
		}
		if n == 0 {
			return false // a placeholder matches one character at least
		}
		// the placeholder takes the segment; a literal after it must follow
		route = route[n:]
	}
}

// InRoutes is LiteLLM's check_route_access: route is in list exactly, under a pattern ending
// in "*", or by a "{param}" pattern.
func InRoutes(list []string, route string) bool { return inGroup(list, route) }

// DefaultTeamMemberPermissions are the key routes a team member (role user) may call on its
// team's keys when the team sets no team_member_permissions (LiteLLM
// team_member_permission_checks.py DEFAULT_TEAM_MEMBER_PERMISSIONS).
var DefaultTeamMemberPermissions = []string{"/key/info", "/key/health"}

// IsKeyManagementRoute reports whether route is one of LiteLLM's key management routes
// (LiteLLMRoutes.key_management_routes, the values team_member_permissions may list).
func IsKeyManagementRoute(route string) bool {
	return route == "/key/health" || slices.Contains(keyManagementRoutes, route)
}
