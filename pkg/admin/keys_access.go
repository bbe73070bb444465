package admin

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

// teamMemberKeyDuration applies the team's team_member_key_duration to a /key/generate of a
// team member's key (team_id and user_id both set; a service account key, without user_id,
// is left alone), as LiteLLM's add_team_member_key_duration: no duration given → the team's;
// a duration longer than the team's → Invalid `duration <d> is longer than the team's
// team_member_key_duration <t>` (LiteLLM validates the ceiling before applying it).
func (a *Admin) teamMemberKeyDuration(ctx context.Context, req KeyRequest, vals store.Values) error {
	teamID, _ := vals["team_id"].(string)
	userID, _ := vals["user_id"].(string)
	if teamID == "" || userID == "" {
		return nil
	}
	row, err := a.st.Get(ctx, store.Team, teamID)
	if err != nil {
		return nil // checkKeyOwners answered for a missing team
	}
	team, err := accounts.BuildTeamRow(row)
	if err != nil || team.Fields.MemberKeyDuration == "" {
		return nil
	}
	max, err := keys.ParseDuration(team.Fields.MemberKeyDuration)
	if err != nil {
		return nil // checked when written
	}
	if req.Duration == nil || *req.Duration == "" {
		vals["expires"] = time.Now().Add(max)
		return nil
	}
	if d, err := keys.ParseDuration(*req.Duration); err == nil && d > max {
		return invalidf("duration %s is longer than the team's team_member_key_duration %s", *req.Duration, team.Fields.MemberKeyDuration)
	}
	return nil
}

// keyOrganization checks a key write's organization_id (LiteLLM key organization_id): the
// organization must exist (Invalid `Organization not found, passed organization_id=<id>`, as
// the accounts' organization_id), and a team key belongs to its team's organization (LiteLLM's
// add_team_organization_id sets it from the team): another → Invalid `organization_id: a key
// of team <team> belongs to the team's organization <org>`. cur is the key updated (nil:
// generate).
func (a *Admin) keyOrganization(ctx context.Context, req KeyRequest, vals store.Values, cur *keys.Key) error {
	raw, ok := req.Extra["organization_id"]
	if !ok {
		return nil
	}
	var org string
	if json.Unmarshal(raw, &org) != nil || org == "" {
		return nil // null or "": no organization of its own
	}
	if _, err := a.st.Get(ctx, store.Organization, org); errors.Is(err, store.ErrNotFound) {
		return invalid("organization_id", "Organization not found, passed organization_id=%s", org)
	} else if err != nil {
		return err
	}
	teamID, set := vals["team_id"].(string)
	if _, given := vals["team_id"]; !given && cur != nil {
		teamID, set = cur.TeamID, true
	}
	if !set || teamID == "" {
		return nil
	}
	row, err := a.st.Get(ctx, store.Team, teamID)
	if err != nil {
		return nil // checkKeyOwners answers for the team
	}
	team, err := accounts.BuildTeamRow(row)
	if err != nil {
		return nil
	}
	if team.OrganizationID == nil || *team.OrganizationID != org {
		teamOrg := "None"
		if team.OrganizationID != nil && *team.OrganizationID != "" {
			teamOrg = *team.OrganizationID
		}
		return invalidf("organization_id: a key of team %s belongs to the team's organization %s", teamID, teamOrg)
	}
	return nil
}
