package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
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
// flag.ErrHelp (exit 0). Any other error points to the subcommand's --help.
func (c *command) parse(args []string) error {
	err := c.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(os.Stdout, c.FlagSet, c.synopsis, c.about)
		return err
	}
	if err != nil {
		return flagHint(err, c.Name())
	}
	return nil
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

// commandHelp is `gateway help COMMAND`: the command's own --help (exit 0).
func commandHelp(ctx context.Context, name string) error {
	run := map[string]func(context.Context, []string) error{"serve": serve, "migrate": migrate, "dev": dev, "healthcheck": healthcheck}
	if name == "version" {
		fmt.Print("usage: gateway version (or gateway --version)\n\nPrints the module version, commit and build time.\n")
		return nil
	}
	f, ok := run[name]
	if !ok {
		return fmt.Errorf("help: unknown command %q (want serve, migrate, dev, healthcheck or version)", name)
	}
	return f(ctx, []string{"--help"})
}

// flagHint adds a pointer to the command's --help to a flag parse error (Go's flag package
// says only "flag provided but not defined: -x").
func flagHint(err error, cmd string) error {
	return fmt.Errorf("%w (see gateway %s --help)", err, cmd)
}

// splitAddr splits a listen address HOST:PORT; an address without a port (such as "4100") is
// an error saying what is wanted, with an example built from it.
func splitAddr(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err == nil {
		if _, perr := net.LookupPort("tcp", port); perr != nil || port == "" {
			err = errors.New("bad port")
		}
	}
	if err != nil {
		eg := "127.0.0.1:4000"
		if n, aerr := strconv.Atoi(addr); aerr == nil && n > 0 && n < 65536 {
			eg = "127.0.0.1:" + addr
		}
		return "", "", fmt.Errorf("%q: want HOST:PORT, e.g. %s", addr, eg)
	}
	return host, port, nil
}
