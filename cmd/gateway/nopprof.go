//go:build !pprof

package main

// loaded marks the end of the initial load (a start-up profile ends there in a build with
// -tags pprof, pprof.go); nothing in a release build.
func loaded() {}
