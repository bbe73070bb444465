package api

import (
	"context"
	mgmt "lockstep/pkg/admin"
)

// accountSpend is an account's spend (USD) in its current budget period: this replica's view
// when it has one (cluster total plus unflushed), else the cluster total in gateway.key_spend;
// 0 when nothing was spent or spend is not tracked here.
func (s *Server) accountSpend(ctx context.Context, typ mgmt.ObjectType, id string) float64 {
	kind := map[mgmt.ObjectType]string{mgmt.TypeUser: "user", mgmt.TypeTeam: "team", mgmt.TypeOrganization: "organization", mgmt.TypeEndUser: "end_user"}[typ]
	if kind == "" || s.Spend == nil {
		return 0
	}
	return s.ownerSpend(ctx, mgmt.OwnerToken(kind, id))
}

// ownerSpend is the spend (USD, current budget period) under a key_spend token: this
// replica's view when it has one, else the cluster total plus this replica's unflushed spend.
func (s *Server) ownerSpend(ctx context.Context, tok string) float64 {
	if s.Spend == nil {
		return 0
	}
	if v, _, ok := s.Spend.Spend(tok); ok {
		return v
	}
	if s.DB == nil {
		return 0
	}
	got, err := s.DB.GetKeySpend(ctx, []string{tok})
	if err != nil {
		return 0
	}
	return got[tok].Spend + s.Spend.Unflushed(tok)
}
