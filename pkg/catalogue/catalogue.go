// Package catalogue is the one list of LiteLLM's management request fields and what lockstep
// does with each (API.md "Compatibility policy"): every field of LiteLLM's request models is
// accepted; one that changes what a caller may do or spend is honoured on every replica, an
// informational one is stored and returned, and a name LiteLLM does not define is a 400 naming
// it. A field that would limit a caller and that lockstep does not enforce yet is refused with
// a 400 naming it as not supported yet, never accepted and ignored.
//
// Read from LiteLLM's litellm/proxy/_types.py at BerriAI/litellm commit
// 00025c847316ae5d1e0d453e53d204e81f710c3e (the 1.8x line): GenerateRequestBase, KeyRequestBase,
// GenerateKeyRequest, UpdateKeyRequest, NewUserRequest, UpdateUserRequestNoUserIDorEmail,
// UpdateUserRequest, TeamBase, NewTeamRequest, UpdateTeamRequest, LiteLLM_BudgetTable,
// NewOrganizationRequest, LiteLLM_OrganizationTableUpdate, BudgetNewRequest,
// NewCustomerRequest, UpdateCustomerRequest, Member, OrgMember, TeamMemberAddRequest,
// TeamMemberUpdateRequest, TeamMemberDeleteRequest, OrganizationMemberAddRequest,
// OrganizationMemberUpdateRequest, OrganizationMemberDeleteRequest. user_name on
// NewUserRequest is from LiteLLM's documented /user/new examples (older models accepted it).
// How the access fields are enforced (allowed_routes, key_type, object_permission,
// team_member_permissions, ...; pkg/access) was read at commit
// 00145f91a8cbcac1f181228efe7acd0cfa71a731.
package catalogue

import (
	"fmt"
	"sort"
	"strings"
)

// Treatment is what lockstep does with a LiteLLM request field.
type Treatment int

const (
	// Column: honoured through a column or parameter of lockstep's own (the route's decoder
	// declares it; e.g. models, max_budget, rpm_limit, key_alias).
	Column Treatment = iota + 1
	// Honoured: changes what a caller may do; kept in the object's litellm_fields jsonb and
	// applied on every replica (aliases, model_aliases).
	Honoured
	// Stored: informational; kept in the object's litellm_fields jsonb and returned by the
	// info and list answers (metadata-like: tags, user_name, send_invite_email, ...).
	Stored
	// NotYet: would limit a caller (or change what it may do) and is not enforced by lockstep
	// yet: a value other than LiteLLM's default (null, {}, [], false, 0, "default") is a 400
	// naming the field as not supported yet.
	NotYet
)

func (t Treatment) String() string {
	switch t {
	case Column, Honoured:
		return "honoured"
	case Stored:
		return "stored"
	case NotYet:
		return "refused (not supported yet)"
	}
	return "refused"
}

// Kind is the JSON type of a field kept in litellm_fields (checked before anything is stored).
type Kind int

const (
	Any       Kind = iota // any JSON value
	String                // a string
	Strings               // a list of strings
	Bool                  // true or false
	Number                // a number
	Object                // a JSON object
	StringMap             // an object of string values ({"alias": "model group"})
	IntMap                // an object of integers >= 0 ({"model group": 10})
	// ModelBudgetMap is LiteLLM's model_max_budget: {"model group": {"budget_limit": USD,
	// "time_period": "1d"}} (keys.ParseModelBudgets).
	ModelBudgetMap
	// ObjectPermission is LiteLLM's object_permission (access.CheckObjectPermission: agents
	// honoured, the members gating features lockstep lacks stored, the rest not supported yet).
	ObjectPermission
	// KeyType is LiteLLM's key_type: "llm_api", "management", "read_only" or "default"; /key/generate
	// turns it into the key's allowed_routes (access.KeyTypeRoutes), as LiteLLM's handle_key_type.
	KeyType
	// LimitType is rpm_limit_type / tpm_limit_type: "best_effort_throughput" (LiteLLM's default,
	// what lockstep's limiter does) or null; "guaranteed_throughput" and "dynamic" are not
	// supported yet.
	LimitType
	// Duration is a LiteLLM duration string ("30s", "1h", "30d", "1mo"; keys.ParseDuration).
	Duration
	// Permissions is LiteLLM's key permissions object: {"get_spend_routes": true} lets a
	// non-admin key call the /global/spend routes (route_checks.py); any other member (LiteLLM's
	// hooks read them as per-key guardrail and PII switches) is not supported yet.
	Permissions
	// KeyRoutes is a list of LiteLLM key management routes ("/key/generate", "/key/update",
	// ...; team_member_permissions).
	KeyRoutes
	// RouterSettings is a key's or team's router_settings: the members LiteLLM's Router
	// applies per call (router.ParseCallerSettings: fallbacks, context_window_fallbacks,
	// content_policy_fallbacks, num_retries, timeout, model_group_alias); any other member
	// is a 400 naming it.
	RouterSettings
	// GroupIDs is a key's or team's access_group_ids: a list of at most 100 non-blank ids of
	// unified access groups (gateway.access_groups, sql/016), each of which must exist when
	// the write commits (admin Writer.lockLinkedAccessGroups).
	GroupIDs
)

// Field is one field of a LiteLLM request model.
type Field struct {
	Treatment Treatment
	Kind      Kind
}

// Model names a LiteLLM request model as a lockstep route decodes it.
type Model string

const (
	GenerateKey      Model = "GenerateKeyRequest"
	UpdateKey        Model = "UpdateKeyRequest"
	NewUser          Model = "NewUserRequest"
	UpdateUser       Model = "UpdateUserRequest"
	NewTeam          Model = "NewTeamRequest"
	UpdateTeam       Model = "UpdateTeamRequest"
	NewOrganization  Model = "NewOrganizationRequest"
	UpdateOrg        Model = "UpdateOrganizationRequest"
	NewCustomer      Model = "NewCustomerRequest"
	UpdateCustomer   Model = "UpdateCustomerRequest"
	TeamMemberAdd    Model = "TeamMemberAddRequest"
	TeamMemberUpdate Model = "TeamMemberUpdateRequest"
	TeamMemberDelete Model = "TeamMemberDeleteRequest"
	OrgMemberAdd     Model = "OrganizationMemberAddRequest"
	OrgMemberUpdate  Model = "OrganizationMemberUpdateRequest"
	OrgMemberDelete  Model = "OrganizationMemberDeleteRequest"
	BudgetNew        Model = "BudgetNewRequest"
)

var (
	col      = Field{Treatment: Column}
	honoured = func(k Kind) Field { return Field{Treatment: Honoured, Kind: k} }
	stored   = func(k Kind) Field { return Field{Treatment: Stored, Kind: k} }
	notYet   = Field{Treatment: NotYet}
)

type fieldSet map[string]Field

func merge(sets ...fieldSet) fieldSet {
	out := fieldSet{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// generateRequestBase: LiteLLM's GenerateRequestBase (shared by keys and users).
var generateRequestBase = fieldSet{
	"key_alias": col, "duration": col, "models": col, "spend": notYet, "max_budget": col,
	"user_id": col, "team_id": col, "agent_id": notYet, "max_parallel_requests": col,
	"metadata": col, "tpm_limit": col, "rpm_limit": col, "budget_duration": col,
	"allowed_cache_controls": notYet, "config": stored(Object), "permissions": notYet,
	"model_max_budget": honoured(ModelBudgetMap), "model_rpm_limit": notYet, "model_tpm_limit": notYet,
	"guardrails": notYet, "policies": notYet, "prompts": stored(Strings), "blocked": col,
	"aliases": honoured(StringMap), "object_permission": notYet,
}

// keyRequestBase: LiteLLM's KeyRequestBase (GenerateRequestBase plus these).
var keyRequestBase = merge(generateRequestBase, fieldSet{
	"key": col, "budget_id": honoured(String), "tags": stored(Strings), "enforced_params": honoured(Strings),
	"model_rpm_limit": honoured(IntMap), "model_tpm_limit": honoured(IntMap),
	"guardrails": honoured(Strings), "allowed_routes": honoured(Strings), "allowed_passthrough_routes": stored(Strings),
	"allowed_vector_store_indexes": stored(Any), "rpm_limit_type": honoured(LimitType), "tpm_limit_type": honoured(LimitType),
	"router_settings": honoured(RouterSettings),
	// LiteLLM's unified access groups by id (sql/016): their models and agents grant or, for
	// a key without models, narrow access on every call (call.Caller.CanUse, api agentAllowed)
	"access_group_ids": honoured(GroupIDs),
	// the agent owning the key: its require_trace_id_on_calls_by_agent holds for the key's
	// calls (LiteLLM common_checks; api agentKeyTrace)
	"agent_id": honoured(String),
	// on a key (not a user): the guardrails of the named policies (sql/017) run on every call
	// of the key (pkg/call callerGuardrails); each must exist when written
	"policies": honoured(Strings),
	// on a key (not a user): enforced per call (pkg/access, api/key_access.go)
	"allowed_cache_controls": honoured(Strings), "permissions": honoured(Permissions),
	"object_permission": honoured(ObjectPermission),
})

// budgetTable: LiteLLM_BudgetTable's user-controllable fields, on the organization and
// customer models. model_max_budget goes where LiteLLM keeps it, the budget row the object
// links (organization_endpoints.py new_organization / update_organization, customer_endpoints.py
// new_end_user): written to the object's linked budget, one made for it when it links none
// (the route's decoder declares it; admin.AccountExtras).
var budgetTable = fieldSet{
	"budget_id": honoured(String), "soft_budget": stored(Number), "max_budget": col, "max_parallel_requests": col,
	"tpm_limit": col, "rpm_limit": col, "model_max_budget": col, "budget_duration": col,
}

// teamBase: LiteLLM's TeamBase.
var teamBase = fieldSet{
	// admins and members: LiteLLM_TeamTable's legacy lists, kept by LiteLLM but never read for
	// access (team roles come from members_with_roles only: _is_user_team_admin,
	// team_member_permission_checks.py), so stored
	"team_alias": col, "team_id": col, "organization_id": col, "admins": stored(Any), "members": stored(Any),
	"members_with_roles": col, "team_member_permissions": honoured(KeyRoutes), "metadata": col, "tpm_limit": col,
	"rpm_limit": col, "max_budget": col, "soft_budget": stored(Number), "budget_duration": col,
	"models": col, "blocked": col, "router_settings": honoured(RouterSettings), "access_group_ids": honoured(GroupIDs),
	// not in TeamBase but in LiteLLM_TeamTable, and a lockstep column since issue 13
	"max_parallel_requests": col,
}

// teamExtra: the fields NewTeamRequest and UpdateTeamRequest add to TeamBase.
var teamExtra = fieldSet{
	"model_aliases": honoured(StringMap), "tags": stored(Strings), "guardrails": honoured(Strings),
	"policies": honoured(Strings), "prompts": stored(Strings), "object_permission": honoured(ObjectPermission),
	"allowed_passthrough_routes": stored(Strings), "secret_manager_settings": stored(Object),
	"model_rpm_limit": honoured(IntMap), "model_tpm_limit": honoured(IntMap), "team_member_budget": col,
	"team_member_rpm_limit": col, "team_member_tpm_limit": col,
	"team_member_key_duration": honoured(Duration), "team_member_budget_duration": col,
	"allowed_vector_store_indexes": stored(Any), "enforced_batch_output_expires_after": stored(Object),
	"enforced_file_expires_after": stored(Object),
}

// customerFields: NewCustomerRequest's and UpdateCustomerRequest's own fields. A customer's
// object_permission is honoured as a key's (its agents bind the A2A calls made for it).
var customerFields = fieldSet{
	"user_id": col, "alias": col, "blocked": col, "budget_id": honoured(String),
	"allowed_model_region": col, "default_model": col, "object_permission": honoured(ObjectPermission),
}

// Models is the catalogue: every field of each LiteLLM request model lockstep serves, with
// its treatment. Routes: GenerateKey /key/generate, UpdateKey /key/update, NewUser /user/new,
// UpdateUser /user/update, NewTeam /team/new, UpdateTeam /team/update, NewOrganization
// /organization/new, UpdateOrg /organization/update, NewCustomer /customer/new and
// /end_user/new, UpdateCustomer /customer/update and /end_user/update, the member models
// their /team/member_* and /organization/member_* routes, BudgetNew /budget/new and
// /budget/update. A budget_id links the object to a budget (sql/012) whose limits then hold
// for it too, on every replica.
var Models = map[Model]fieldSet{
	GenerateKey: merge(keyRequestBase, fieldSet{
		"spend": col, "soft_budget": stored(Number), "send_invite_email": stored(Bool), "key_type": honoured(KeyType),
		// rotated by the cluster's rotation job (admin/rotation.go)
		"auto_rotate": honoured(Bool), "rotation_interval": honoured(Duration), "organization_id": honoured(String),
		// the key's project (sql/020): its models, blocked flag, budget and limits gate the key's
		// calls; it must exist when written (LiteLLM GenerateKeyRequest.project_id; not in
		// UpdateKeyRequest)
		"project_id": honoured(String),
	}),
	UpdateKey: merge(keyRequestBase, fieldSet{
		"spend": col, "temp_budget_increase": honoured(Number), "temp_budget_expiry": honoured(String), "auto_rotate": honoured(Bool),
		"rotation_interval": honoured(Duration), "organization_id": honoured(String),
	}),
	NewUser: merge(generateRequestBase, fieldSet{
		"user_email": col, "user_alias": col, "user_role": col, "teams": col, "auto_create_key": col,
		"send_invite_email": stored(Bool), "sso_user_id": stored(String), "organizations": col,
		"password": stored(String), "user_name": stored(String), "spend": col,
		// lockstep: a user's own organization (LiteLLM_UserTable.organization_id)
		"organization_id": col,
		// generate_key_helper_fn gives these to the auto-created key, where they are enforced
		// as the key's own (api newUserKeyFields); LiteLLM enforces none per user
		"allowed_cache_controls": honoured(Strings), "permissions": honoured(Permissions),
		"model_rpm_limit": honoured(IntMap), "model_tpm_limit": honoured(IntMap),
		"guardrails": honoured(Strings), "object_permission": honoured(ObjectPermission),
		"policies": honoured(Strings), "agent_id": honoured(String),
	}),
	UpdateUser: merge(generateRequestBase, fieldSet{
		"spend": col, "password": stored(String), "user_alias": col, "user_role": col, "user_email": col,
		"user_name": stored(String), "organization_id": col,
		// on a user (not its key) these are LiteLLM_UserTable-less: aliases and key_alias are
		// informational; duration is "[NOT IMPLEMENTED]" on user_update and team_id is
		// LiteLLM_UserTable's legacy team_id (no membership)
		"aliases": stored(StringMap), "key_alias": stored(String), "duration": stored(Duration), "team_id": stored(String),
		// user_update keeps these on the user row only (its metadata, allowed_cache_controls,
		// object_permission_id); LiteLLM's call path reads them from keys and teams, never from
		// the user (get_key_model_rpm_limit, _add_guardrails_from_key_or_team_metadata,
		// _PROXY_CacheControlCheck, AgentRequestHandler), and a user's MCP ceiling gates routes
		// lockstep does not serve
		"allowed_cache_controls": stored(Strings), "permissions": stored(Permissions),
		"model_rpm_limit": stored(IntMap), "model_tpm_limit": stored(IntMap),
		"guardrails": stored(Strings), "object_permission": stored(ObjectPermission),
		// likewise user-row only: policies (the metadata _add_guardrails_from_policies_in_metadata
		// reads from keys, teams and projects, never the user's) and agent_id (a key's owning
		// agent; a user is no agent's key)
		"policies": stored(Strings), "agent_id": stored(String),
	}),
	NewTeam:    merge(teamBase, teamExtra),
	UpdateTeam: merge(teamBase, teamExtra),
	// an organization's model_rpm_limit / model_tpm_limit hold per model group across all
	// its keys (LiteLLM keeps them in the organization's metadata; parallel_request_limiter_v3
	// descriptor model_per_organization)
	NewOrganization: merge(budgetTable, fieldSet{
		"organization_id": col, "organization_alias": col, "models": col, "metadata": col,
		"model_rpm_limit": honoured(IntMap), "model_tpm_limit": honoured(IntMap), "object_permission": honoured(ObjectPermission),
		"blocked": col,
	}),
	UpdateOrg: merge(budgetTable, fieldSet{
		"organization_id": col, "organization_alias": col, "spend": col, "metadata": col,
		"models": col, "updated_by": stored(String), "object_permission": honoured(ObjectPermission),
		"model_rpm_limit": honoured(IntMap), "model_tpm_limit": honoured(IntMap), "blocked": col,
	}),
	// budget_reset_at: when the customer's spend next resets (LiteLLM keeps it in the
	// customer's budget row, whose reset job resets the linked customers' spend)
	NewCustomer: merge(budgetTable, customerFields, fieldSet{"spend": col, "budget_reset_at": col, "metadata": col}),
	UpdateCustomer: merge(customerFields, fieldSet{
		"max_budget": col, "metadata": col, "budget_duration": col, "tpm_limit": col, "rpm_limit": col,
		"max_parallel_requests": col,
	}),
	TeamMemberAdd:    {"team_id": col, "member": col, "max_budget_in_team": col},
	TeamMemberUpdate: {"team_id": col, "user_id": col, "user_email": col, "role": col, "max_budget_in_team": col, "tpm_limit": col, "rpm_limit": col},
	TeamMemberDelete: {"team_id": col, "user_id": col, "user_email": col},
	OrgMemberAdd:     {"organization_id": col, "member": col, "max_budget_in_organization": col},
	OrgMemberUpdate:  {"organization_id": col, "user_id": col, "user_email": col, "role": col, "max_budget_in_organization": col},
	OrgMemberDelete:  {"organization_id": col, "user_id": col, "user_email": col},
	BudgetNew: {
		"budget_id": col, "max_budget": col, "soft_budget": col, "max_parallel_requests": col,
		"tpm_limit": col, "rpm_limit": col, "budget_duration": col, "model_max_budget": col,
		"budget_reset_at": col,
	},
}

// Lookup returns field name of model m, if LiteLLM's model defines it.
func Lookup(m Model, name string) (Field, bool) {
	f, ok := Models[m][name]
	return f, ok
}

// Names lists model m's fields in name order.
func Names(m Model) []string {
	out := make([]string, 0, len(Models[m]))
	for n := range Models[m] {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// order is the docs' order of the models.
var order = []Model{GenerateKey, UpdateKey, NewUser, UpdateUser, NewTeam, UpdateTeam, NewOrganization, UpdateOrg,
	NewCustomer, UpdateCustomer, TeamMemberAdd, TeamMemberUpdate, TeamMemberDelete, OrgMemberAdd, OrgMemberUpdate,
	OrgMemberDelete, BudgetNew}

// Markdown renders the catalogue as docs/api.md shows it: one row per request model, its
// fields by treatment (each list in name order).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| LiteLLM request model | honoured | stored and returned | refused: not supported yet |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, m := range order {
		var h, s, n []string
		for _, name := range Names(m) {
			f := Models[m][name]
			switch f.Treatment {
			case Column, Honoured:
				h = append(h, "`"+name+"`")
			case Stored:
				s = append(s, "`"+name+"`")
			case NotYet:
				n = append(n, "`"+name+"`")
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m, strings.Join(h, ", "), strings.Join(s, ", "), strings.Join(n, ", "))
	}
	return b.String()
}
