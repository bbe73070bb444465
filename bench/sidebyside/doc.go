// Package sidebyside measures what one gateway replica adds to an LLM call: a zero-latency
// fake upstream (OpenAI chat JSON and SSE, embeddings), a throwaway Postgres (pkg/pgcluster)
// and one replica of the gateway binary as a real process; the same closed-loop HTTP client
// then drives the upstream directly and through the gateway, alternating, in one run. Figures
// are printed, never asserted (see BenchmarkSideBySide):
//
//	go test ./bench/sidebyside/ -run '^$' -bench SideBySide -benchtime 1x
package sidebyside
