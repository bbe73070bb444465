package provider_test

import (
	"lockstep/pkg/provider"
	"lockstep/pkg/provider/bedrock"
	"lockstep/pkg/provider/gemini"
	"lockstep/pkg/provider/ollama"
	"lockstep/pkg/provider/vertex"
)

// The package's tests build deployments of every vendor through provider.NewDeployment, as
// cmd/gateway's builder would (see export_test.go).
func init() {
	provider.UseTestVendors(ollama.Vendor, gemini.Vendor, vertex.Vendor, bedrock.Vendor)
}
