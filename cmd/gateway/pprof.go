//go:build pprof

package main

// Built only with `-tags pprof` (bench/sidebyside builds the gateway that way): serves
// net/http/pprof on GATEWAY_PPROF_ADDR (host:port) when it is set, on its own listener, so
// that a replica under load can be profiled. Release builds contain none of this.

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

func init() {
	addr := os.Getenv("GATEWAY_PPROF_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		if err := srv.ListenAndServe(); err != nil {
			fmt.Fprintln(os.Stderr, "gateway: pprof:", err)
		}
	}()
}
