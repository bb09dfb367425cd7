package main

import (
	"fmt"
	"os"
	"os/exec"
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

// The init container runs as root with CHOWN alone (and the binary's file
// capabilities), not FOWNER: on a directory an earlier run already gave the
// agent's user - the pod restarted, or another node's pod on a shared
// host - it still succeeds (it failed there with chmod: operation not
// permitted, and every agent pod stayed in PodInitializing on real nodes).
func TestTheStateDirIsMadeTheAgentsWithChownAlone(t *testing.T) {
	if os.Getenv("OWN_STATE_DIR") != "" {
		if err := ownDir(os.Getenv("OWN_STATE_DIR"), "65532:65532"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	setpriv, err := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and setpriv")
	}
	dir := filepath.Join(t.TempDir(), "state")
	run := func() {
		t.Helper()
		cmd := exec.Command(setpriv, "--bounding-set=-all,+chown,+net_bind_service,+net_raw", os.Args[0], "-test.run=^TestTheStateDirIsMadeTheAgentsWithChownAlone$")
		cmd.Env = append(os.Environ(), "OWN_STATE_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ownDir with CHOWN alone: %v: %s", err, out)
		}
	}
	run() // the kubelet's fresh directory
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run() // the agent's already, another mode
	run() // the agent's already, as it leaves it
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || st.Uid != 65532 || st.Gid != 65532 {
		t.Errorf("%s: %v %d:%d, want 0700 65532:65532", dir, fi.Mode().Perm(), st.Uid, st.Gid)
	}
}

// A --state-dir mistyped as a directory of the host's (/etc, /var/lib) is
// refused and left as it was: the init container runs as root and would
// give it to the agent's user, which is every distroless image's default
// user. A directory holding only the agents' memories is taken.
func TestOwnDirTakesNoDirectoryHoldingOthersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the files must be another user's")
	}
	mkdir := func(t *testing.T, dir string, mode os.FileMode) {
		t.Helper()
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, fill := range map[string]func(t *testing.T, dir string){
		"a daemon's directory": func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "kubelet"), 0o700) },
		"a file of root's": func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "shadow"), []byte("root:*:1::::::\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"a link named as a memory": func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/shadow", filepath.Join(dir, "routers-n1.json")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "lib")
			mkdir(t, dir, 0o755)
			fill(t, dir)
			err := ownDir(dir, "65532:65532")
			fi, serr := os.Stat(dir)
			if serr != nil {
				t.Fatal(serr)
			}
			if st := fi.Sys().(*syscall.Stat_t); err == nil || st.Uid != 0 || fi.Mode().Perm() != 0o755 {
				t.Errorf("ownDir: err %v, now %v %d:%d; want it refused and the directory left root's, 0755", err, fi.Mode().Perm(), st.Uid, st.Gid)
			}
		})
	}
	own := filepath.Join(t.TempDir(), "state")
	mkdir(t, own, 0o700)
	for _, f := range []string{"routers-node1.json", "routers-node1.json.123456"} { // a memory, a write cut short
		if err := os.WriteFile(filepath.Join(own, f), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(own, f), 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	if err := ownDir(own, "65532:65532"); err != nil {
		t.Errorf("ownDir on the agent's own state directory: %v", err)
	}
}
