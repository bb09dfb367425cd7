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
	// Perl, not sh: a shell cannot trap or reset a signal ignored when it
	// started (under nohup, say), and this child must start with SIGHUP's
	// default action - the one that ended radvd - and catch it 0.3 s later.
	cmd := exec.Command("perl", "-e", `$SIG{HUP} = "DEFAULT"; select(undef, undef, undef, 0.3);
		$SIG{HUP} = sub { open(my $f, ">", $ARGV[0]) or die; print $f "yes"; close $f };
		while (1) { select(undef, undef, undef, 0.05) }`, seen)
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
