package admin

import "lockstep/pkg/store"

// The row types, object types and sentinels the management use-cases speak (pkg/store's):
// pkg/api reaches them here, so that it imports neither pkg/store nor pgx (issue 18) and
// every database path goes through a use-case.
type (
	// Row is one stored object as a use-case returns it (its JSON row and version).
	Row = store.Row
	// Values are the columns of a write.
	Values = store.Values
	// ObjectType names a registry type ("model", "key", ...).
	ObjectType = store.ObjectType
	// KeySpend is a key_spend token's spend in its budget period.
	KeySpend = store.KeySpend
	// SpendLog is one gateway.spend_logs row (LiteLLM SpendLogs).
	SpendLog = store.SpendLog
	// UserFilter selects the users /user/list answers.
	UserFilter = store.UserFilter
	// JSONMerge is a jsonb value merged over the stored one (||) rather than replacing it.
	JSONMerge = store.JSONMerge
)

// The object types.
const (
	TypeModel        = store.Model
	TypeGuardrail    = store.Guardrail
	TypeAgent        = store.Agent
	TypeKey          = store.Key
	TypeTeam         = store.Team
	TypeUser         = store.User
	TypeOrganization = store.Organization
	TypeEndUser      = store.EndUser
	TypeBudget       = store.Budget
	TypeAccessGroup  = store.AccessGroup
	TypePolicy       = store.Policy
	TypeAttachment   = store.PolicyAttachment
	TypeProject      = store.Project
)

// The store's sentinels a use-case's error may wrap (errors.Is): no row, an invalid value,
// a duplicate, the database unreachable.
var (
	ErrNotFound    = store.ErrNotFound
	ErrInvalid     = store.ErrInvalid
	ErrConflict    = store.ErrConflict
	ErrUnavailable = store.ErrUnavailable
)

// UserSortColumns are the columns /user/list may sort by.
var UserSortColumns = store.UserSortColumns

// OwnerToken is the key_spend token of an owner's spend (kind "user", "team",
// "organization", "end_user", "team_member"): "<kind>:<id>".
func OwnerToken(kind, id string) string { return store.OwnerToken(kind, id) }

// TeamMemberID is the id of a team member's spend: "<team>:<user>".
func TeamMemberID(teamID, userID string) string { return store.TeamMemberID(teamID, userID) }
