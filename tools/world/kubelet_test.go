package world

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRealNodesTakeTurnsWithTheKindSmoke: while another process (the kind
// smoke, e2e/kind/run.sh) holds the kubelets lock, the first world of real
// nodes waits for it; the worlds of one process share it, and the last one to
// close lets it go.
func TestRealNodesTakeTurnsWithTheKindSmoke(t *testing.T) {
	saved := kubeletsLockFile
	kubeletsLockFile = filepath.Join(t.TempDir(), "kubelets.lock")
	t.Cleanup(func() { kubeletsLockFile = saved })

	// The kind smoke: its own open file, as flock(1) in run.sh holds it.
	smoke, err := os.OpenFile(kubeletsLockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer smoke.Close()
	if err := syscall.Flock(int(smoke.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	locked := make(chan error, 1)
	go func() { locked <- lockKubelets(t.Context()) }()
	select {
	case err := <-locked:
		t.Fatalf("a world of real nodes started while the kind smoke held the lock (err %v)", err)
	case <-time.After(1500 * time.Millisecond): // lockKubelets polls each second
	}
	if err := syscall.Flock(int(smoke.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("after the smoke let go: %v", err)
	}

	// A second world of this process shares the lock without waiting.
	if err := lockKubelets(t.Context()); err != nil {
		t.Fatal(err)
	}
	tryLock := func() error { return syscall.Flock(int(smoke.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
	unlockKubelets()
	if err := tryLock(); err == nil {
		t.Fatal("the kind smoke got the lock while a world of real nodes still ran")
	}
	unlockKubelets()
	if err := tryLock(); err != nil {
		t.Fatalf("the lock is still held after the last world closed: %v", err)
	}
}
