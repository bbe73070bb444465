package router

import (
	"testing"

	"lockstep/pkg/registry"
)

func regionDep(name string) *registry.Entry[*Deployment] {
	h := &Headers{}
	if name != "" {
		h.Region = []string{name}
	}
	return &registry.Entry[*Deployment]{Value: &Deployment{Headers: h}}
}

func TestRegionOf(t *testing.T) {
	for name, want := range map[string]string{
		"eu": "eu", "us": "us", "eu-west-1": "eu", "europe-west4": "eu", "westeurope": "eu", "swedencentral": "eu",
		"uksouth": "eu", "us-east-1": "us", "us-central1": "us", "eastus": "us", "westus2": "us",
		"australiaeast": "", "ap-south-1": "", "": "",
	} {
		if got := RegionOf(regionDep(name).Value); got != want {
			t.Errorf("RegionOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestInRegion(t *testing.T) {
	eu, us, none := regionDep("eu-west-1"), regionDep("us-east-1"), regionDep("")
	g := []*registry.Entry[*Deployment]{eu, us, none}
	if got := InRegion(g, "eu"); len(got) != 1 || got[0] != eu {
		t.Fatalf("eu: %v", got)
	}
	if got := InRegion(g[1:2], "us"); &got[0] != &g[1] {
		t.Fatal("an all-matching group is returned as is")
	}
	if got := InRegion(g[1:], "eu"); len(got) != 0 {
		t.Fatalf("no eu deployment: %v", got)
	}
}
