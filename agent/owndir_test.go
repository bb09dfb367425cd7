package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The init container's step: the state directory, created if missing (the
// kubelet's DirectoryOrCreate makes it root's, 0755), becomes the agent's
// user's, 0700. A wrong owner or no directory is an error, not a guess.
func TestTheStateDirIsMadeTheAgents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	for _, d := range []string{dir, filepath.Join(t.TempDir(), "missing")} {
		if err := ownDir(d, owner); err != nil {
			t.Fatalf("ownDir(%s, %s): %v", d, owner, err)
		}
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
			t.Errorf("%s: %v %d:%d, want 0700 %s", d, fi.Mode().Perm(), st.Uid, st.Gid, owner)
		}
	}
	for _, c := range []struct{ dir, owner string }{{dir, "agent"}, {dir, "-1:0"}, {"", owner}} {
		if err := ownDir(c.dir, c.owner); err == nil {
			t.Errorf("ownDir(%q, %q) succeeded", c.dir, c.owner)
		}
	}
}
