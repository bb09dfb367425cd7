package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs the plugin's main instead of the tests when asked
// (RENUMBER_PLUGIN_MAIN=1), so a test can run the command line as a user does.
func TestMain(m *testing.M) {
	if os.Getenv("RENUMBER_PLUGIN_MAIN") == "1" {
		os.Args = append([]string{"kubectl-renumber"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The plugin's version, as `kubectl renumber version` and as the agent's and
// the writer's --version spell it; both exit 0.
func TestTheVersionIsPrintedEitherWay(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		cmd := exec.Command(os.Args[0], arg)
		cmd.Env = append(os.Environ(), "RENUMBER_PLUGIN_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "kubectl-renumber ") {
			t.Errorf("kubectl renumber %s: %v, %q", arg, err, out)
		}
	}
}
