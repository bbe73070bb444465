package sidebyside

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// upstreamEnv set to 1 makes the test binary serve the fake upstream instead of running tests
// (see startUpstreamProcess).
const upstreamEnv = "LOCKSTEP_SIDEBYSIDE_UPSTREAM"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnv) == "1" {
		u, err := startUpstream()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(u.URL)
		// serve until the parent closes stdin (or dies: Pdeathsig)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// upstreamProcess is the fake upstream in a child process (this test binary re-executed), so
// that neither the load generator nor an in-process gateway shares its runtime: its
// allocations and GC are its own.
type upstreamProcess struct {
	URL   string
	cmd   *exec.Cmd
	stdin interface{ Close() error }
}

func startUpstreamProcess() (*upstreamProcess, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), upstreamEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	line = strings.TrimSpace(line)
	if err != nil || !strings.HasPrefix(line, "http://") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("fake upstream process: %q %v", line, err)
	}
	return &upstreamProcess{URL: line, cmd: cmd, stdin: stdin}, nil
}

func (u *upstreamProcess) Close() {
	_ = u.stdin.Close()
	_ = u.cmd.Wait()
}
