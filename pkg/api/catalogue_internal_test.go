package api

import (
	"testing"

	"lockstep/pkg/catalogue"
)

// routeFields are the fields each catalogue model's route declares itself (its decoder's
// known list).
func routeFields() map[catalogue.Model]fields {
	keyFields := fields{}
	for n := range structFieldsOf(typeOfElem(&keyRequest{})).known {
		keyFields[n] = fAny
	}
	id := func(k accountKind) fields { return fields{k.IDField: fString} }
	return map[catalogue.Model]fields{
		catalogue.GenerateKey:      keyFields,
		catalogue.UpdateKey:        keyFields,
		catalogue.NewUser:          userKind.cols.with(id(userKind)).with(userNewFields),
		catalogue.UpdateUser:       userKind.cols.with(id(userKind)).with(userKind.updateExtra),
		catalogue.NewTeam:          teamKind.cols.with(id(teamKind)),
		catalogue.UpdateTeam:       teamKind.cols.with(id(teamKind)),
		catalogue.NewOrganization:  orgKind.cols.with(id(orgKind)),
		catalogue.UpdateOrg:        orgKind.cols.with(id(orgKind)).with(orgKind.updateExtra),
		catalogue.NewCustomer:      endUserKind.cols.with(id(endUserKind)),
		catalogue.UpdateCustomer:   endUserKind.cols.with(id(endUserKind)),
		catalogue.OrgMemberAdd:     {"organization_id": fString, "member": fAny},
		catalogue.OrgMemberUpdate:  {"organization_id": fString, "user_id": fString, "user_email": fString, "role": fString},
		catalogue.OrgMemberDelete:  {"organization_id": fString, "user_id": fString, "user_email": fString},
		catalogue.TeamMemberAdd:    {"team_id": fString, "member": fMembers, "max_budget_in_team": fNumber},
		catalogue.TeamMemberUpdate: {"team_id": fString, "user_id": fString, "user_email": fString, "role": fString, "max_budget_in_team": fNumber, "tpm_limit": fInt, "rpm_limit": fInt},
		catalogue.TeamMemberDelete: {"team_id": fString, "user_id": fString, "user_email": fString},
	}
}

// The catalogue and the routes agree: a field the catalogue says a route honours through its
// own column is declared by that route (else it would answer "unknown field" to a LiteLLM
// field), and a route declares no field the catalogue sends elsewhere (stored, not yet).
func TestCatalogueMatchesRoutes(t *testing.T) {
	for m, known := range routeFields() {
		if len(catalogue.Models[m]) == 0 {
			t.Errorf("%s: not in the catalogue", m)
		}
		for _, n := range catalogue.Names(m) {
			f, _ := catalogue.Lookup(m, n)
			_, declared := known[n]
			if f.Treatment == catalogue.Column && !declared {
				t.Errorf("%s.%s: the catalogue says honoured by a column, the route does not declare it", m, n)
			}
			if f.Treatment != catalogue.Column && declared {
				t.Errorf("%s.%s: the route declares it, the catalogue says %s", m, n, f.Treatment)
			}
		}
	}
}
