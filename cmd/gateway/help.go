package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// exitError is an error with the process exit code it ends gateway with (1 otherwise).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the exit code for err: its exitError's, else 1.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// command is a subcommand's flag set with its help text.
type command struct {
	*flag.FlagSet
	synopsis, about string
}

// newCommand returns a subcommand's flag set: errors are returned, not printed.
func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &command{FlagSet: fs, synopsis: synopsis, about: about}
}

// parse parses args; -h/--help prints the subcommand's help (printHelp) to stdout and returns
// flag.ErrHelp (exit 0).
func (c *command) parse(args []string) error {
	err := c.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(os.Stdout, c.FlagSet, c.synopsis, c.about)
	}
	return err
}

// printHelp writes a subcommand's help: the synopsis, what it does, then every flag with its
// argument, meaning, environment variable and default. A flag's usage text names its env var
// and default as "(env NAME; default VALUE)"; when it names no default, the flag's own
// default value is shown ("none" when empty).
func printHelp(w io.Writer, fs *flag.FlagSet, synopsis, about string) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags (a flag wins over its env var, which wins over the config file):\n", synopsis, about)
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if arg == "value" {
			arg = ""
		}
		if !strings.Contains(usage, "default") {
			def := f.DefValue
			if def == "" {
				def = "none"
			}
			if strings.HasSuffix(usage, ")") {
				usage = strings.TrimSuffix(usage, ")") + "; default " + def + ")"
			} else {
				usage += " (default " + def + ")"
			}
		}
		name := "--" + f.Name
		if arg != "" {
			name += " " + arg
		}
		fmt.Fprintf(w, "  %-28s %s\n", name, usage)
	})
}

// isLoopback reports whether listen address addr (HOST:PORT) only accepts connections from
// this machine: "localhost" or a loopback IP. An empty host (":4000") listens on every
// interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
