package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 23: the -ldflags -X stamps (the Dockerfile's VERSION, COMMIT, BUILD_TIME build args)
// win over the Go build info, and buildVersion (gateway.replicas' and /sync/cluster's version)
// carries the version and the commit's first 12 characters.
func TestBuildVersionStamped(t *testing.T) {
	defer func(v, c, b string) { version, commit, buildTime = v, c, b }(version, commit, buildTime)
	version, commit, buildTime = "v1.2.3", "0123456789abcdef0123", "2026-12-01T20:00:00Z"
	b := readBuildInfo()
	require.Equal(t, buildInfo{Version: "v1.2.3", Commit: "0123456789abcdef0123", BuildTime: "2026-12-01T20:00:00Z"}, b)
	require.Equal(t, "v1.2.3+0123456789ab", buildVersion())
	version, commit = "", ""
	require.NotEmpty(t, readBuildInfo().Version, "the module version from the build info ((devel) in tests)")
}
