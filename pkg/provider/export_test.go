package provider

import "net/http"

// UpstreamHeader is the header every upstream request of d carries (for external tests).
func UpstreamHeader(d *Deployment) http.Header { return d.headers() }

// UseTestVendors makes the package-level NewDeployment (the default builder) serve vendors as
// well, for the internal tests that translate for them (translate_unit_test.go): they cannot
// import the vendor packages, which import this one; vendors_test.go calls it from init.
func UseTestVendors(vendors ...Vendor) {
	b, err := NewBuilder(Policy{}, vendors...)
	if err != nil {
		panic(err)
	}
	defaultBuilder = b
}
