package provider

import "net/http"

// UpstreamHeader is the header every upstream request of d carries (for external tests).
func UpstreamHeader(d *Deployment) http.Header { return d.header }
