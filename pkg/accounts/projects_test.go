package accounts

import (
	"testing"

	"lockstep/pkg/store"
)

// A project row builds with its budget link, models and per-model limits; an empty models list
// allows every model (LiteLLM checks a project's models only when it has some); a negative
// per-model limit (psql may write what the API refuses) refuses the row.
func TestBuildProjectRow(t *testing.T) {
	p, err := BuildProjectRow(store.Row{ID: "p", Data: []byte(`{"project_id":"p","team_id":"t","budget_id":"b",
		"models":["m1"],"blocked":false,"model_rpm_limit":{"m1":5},"model_tpm_limit":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Budget() != "b" || *p.TeamID != "t" || !p.CanUse("m1", nil) || p.CanUse("m2", nil) {
		t.Fatalf("project: %+v", p)
	}
	if p.ModelRPM["m1"] != 5 || len(p.ModelTPM) != 0 {
		t.Fatalf("per-model limits: %+v %+v", p.ModelRPM, p.ModelTPM)
	}
	open, err := BuildProjectRow(store.Row{ID: "q", Data: []byte(`{"project_id":"q","models":[]}`)})
	if err != nil || open.Budget() != "" || !open.CanUse("anything", nil) {
		t.Fatalf("no models, no budget: %+v %v", open, err)
	}
	if _, err := BuildProjectRow(store.Row{ID: "r", Data: []byte(`{"project_id":"r","model_tpm_limit":{"m":-1}}`)}); err == nil {
		t.Fatal("a negative model_tpm_limit built")
	}
}
