package admin

import (
	"context"
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
