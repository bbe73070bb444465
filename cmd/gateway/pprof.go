//go:build pprof

package main

// Built only with `-tags pprof` (bench/sidebyside builds the gateway that way): serves
// net/http/pprof on GATEWAY_PPROF_ADDR (host:port) when it is set, on its own listener, so
// that a replica under load can be profiled; and, when GATEWAY_PROFILE_DIR is set, profiles
// the start-up: a CPU profile from process start until the initial load is done
// (DIR/coldstart-cpu.pprof) and the heap then, after the load's garbage was collected
// (DIR/coldstart-heap.pprof: in-use objects, and everything the load allocated; the runtime's
// memory statistics in DIR/coldstart-memstats.txt). Release
// builds contain none of this.

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	rpprof "runtime/pprof"
	"time"
)

// startupCPU is the start-up CPU profile's file (nil: not profiling).
var startupCPU *os.File

func init() {
	if dir := os.Getenv("GATEWAY_PROFILE_DIR"); dir != "" {
		f, err := os.Create(filepath.Join(dir, "coldstart-cpu.pprof"))
		if err == nil {
			err = rpprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway: start-up profile:", err)
		} else {
			startupCPU = f
		}
	}
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

// loaded ends the start-up profile (GATEWAY_PROFILE_DIR): called once the initial load is
// done and its garbage collected.
func loaded() {
	if startupCPU == nil {
		return
	}
	rpprof.StopCPUProfile()
	_ = startupCPU.Close()
	startupCPU = nil
	f, err := os.Create(filepath.Join(os.Getenv("GATEWAY_PROFILE_DIR"), "coldstart-heap.pprof"))
	if err == nil {
		err = rpprof.Lookup("heap").WriteTo(f, 0)
		_ = f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway: start-up profile:", err)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	mb := func(b uint64) uint64 { return b >> 20 }
	_ = os.WriteFile(filepath.Join(os.Getenv("GATEWAY_PROFILE_DIR"), "coldstart-memstats.txt"), fmt.Appendf(nil,
		"HeapAlloc %d MB, HeapInuse %d MB, HeapIdle %d MB, HeapReleased %d MB, StackInuse %d MB, GCSys %d MB, OtherSys %d MB, Sys %d MB, NumGC %d, PauseTotal %s\n",
		mb(m.HeapAlloc), mb(m.HeapInuse), mb(m.HeapIdle), mb(m.HeapReleased), mb(m.StackInuse), mb(m.GCSys), mb(m.OtherSys), mb(m.Sys), m.NumGC, time.Duration(m.PauseTotalNs)), 0o644)
}
