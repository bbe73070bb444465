// Package sql holds lockstep's numbered migrations, embedded so the binary, the tests and
// `gateway migrate` run the very same files (the River pattern: riverdriver/.../migration).
//
// Files are named NNN_name.sql and applied in order, each in its own transaction, by
// store.Migrate under a Postgres advisory lock.
package sql

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered migration file.
type Migration struct {
	Version int    // NNN prefix of the file name
	Name    string // file name
	SQL     string
}

// All returns every embedded migration in ascending version order. It panics on a malformed
// file name, which can only be a build-time mistake.
func All() []Migration {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic(fmt.Sprintf("migration %q: name must start with a number and an underscore", name))
		}
		body, err := files.ReadFile(name)
		if err != nil {
			panic(err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}
