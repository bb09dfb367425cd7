package world

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A process that has not yet installed its SIGHUP handler is not hung up on
// (the default action would end it, as it ended a radvd a test reloaded right
// after starting it); once it catches SIGHUP, it gets it, and lives.
func TestAReloadWaitsForTheHandler(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "reloaded")
	cmd := exec.Command("sh", "-c", `sleep 0.3; trap 'echo yes > `+seen+`' HUP; while :; do sleep 0.05; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	if err := hangUpWhenCaught(t.Context(), cmd.Process); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(seen); err == nil {
			break
		}
		if caught, err := catchesHangUp(cmd.Process.Pid); err != nil || !caught {
			t.Fatalf("the process did not outlive its SIGHUP (catches it: %v, %v)", caught, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An exited process is an error, not a wait.
func TestAReloadOfAnExitedProcessFails(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a zombie until Wait
	if err := hangUpWhenCaught(t.Context(), cmd.Process); err == nil {
		t.Error("a SIGHUP to an exited process succeeded")
	}
	_ = cmd.Wait()
	if err := hangUpWhenCaught(t.Context(), cmd.Process); err == nil {
		t.Error("a SIGHUP to a reaped process succeeded")
	}
}
