package world

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestATestOfTheMachinesSysctlsWaitsForTheKindSmoke: while the kind smoke
// (e2e/kind/run.sh, flock(1) on its own open file) holds the kubelets lock,
// HoldKubeletsLock waits; once it holds the lock, the smoke cannot start
// until it is released. A world ending while the smoke runs leaves the
// sysctls to it.
func TestATestOfTheMachinesSysctlsWaitsForTheKindSmoke(t *testing.T) {
	saved := kubeletsLockFile
	kubeletsLockFile = filepath.Join(t.TempDir(), "kubelets.lock")
	t.Cleanup(func() { kubeletsLockFile = saved })

	smoke, err := os.OpenFile(kubeletsLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer smoke.Close()
	if err := syscall.Flock(int(smoke.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	if !kindRunning() {
		t.Error("a world ending now would put the sysctls back under the smoke's kubelets")
	}
	type held struct {
		release func()
		err     error
	}
	got := make(chan held, 1)
	go func() { r, err := HoldKubeletsLock(t.Context()); got <- held{r, err} }()
	select {
	case h := <-got:
		t.Fatalf("the lock was taken while the kind smoke held it (err %v)", h.err)
	case <-time.After(1500 * time.Millisecond): // HoldKubeletsLock polls each second
	}
	if err := syscall.Flock(int(smoke.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.err != nil {
		t.Fatalf("after the smoke let go: %v", h.err)
	}
	tryLock := func() error { return syscall.Flock(int(smoke.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
	if err := tryLock(); err == nil {
		t.Fatal("the kind smoke got the lock while the test held it")
	}
	if kindRunning() {
		t.Error("the test's own hold reads as the kind smoke's: its worlds would never put the sysctls back")
	}
	h.release()
	if err := tryLock(); err != nil {
		t.Fatalf("the lock is still held after release: %v", err)
	}
}

// The memory the world forgets before real nodes start is the one the
// shipped install keeps: the DaemonSet's hostPath and --state-dir.
func TestTheWorldForgetsTheShippedStateDir(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "agent", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--state-dir=" + AgentStateDir, "hostPath: {path: " + AgentStateDir} {
		if !strings.Contains(string(b), want) {
			t.Errorf("manifests/agent/daemonset.yaml has no %q: the world would not forget the memory real nodes keep", want)
		}
	}
}
