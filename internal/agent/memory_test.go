package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/renumber/renumber/internal/agent/observe"
)

func aMemory(at time.Time) observe.Memory {
	return observe.Memory{At: at, Links: []observe.LinkMemory{{Name: "eth0", Words: []observe.Remembered{{
		Router: router, Prefix: pA, Since: at.Add(-time.Hour),
		Valid: at.Add(time.Hour), Preferred: at.Add(30 * time.Minute),
		StatedValid: time.Hour, StatedPreferred: 30 * time.Minute, Heard: at, Alike: true,
	}}}}}
}

// The file round-trips; one written before the format was kept is read; a
// missing, garbled, oversized, newer-format, stale or future file is refused with an error that says which, never a crash.
func TestTheMemoryFile(t *testing.T) {
	for _, c := range []struct {
		name    string
		content func(t *testing.T, dir string)
		want    string // "" : the memory back
	}{
		{"written", func(t *testing.T, dir string) {
			if err := saveMemory(dir, "", aMemory(t0)); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"missing", func(*testing.T, string) {}, "no such file"},
		{"garbled", func(t *testing.T, dir string) { write(t, dir, `{"at": "yesterday", "links": [`) }, "parse"},
		{"a word garbled", func(t *testing.T, dir string) {
			write(t, dir, `{"at":"1970-01-01T00:16:40Z","links":[{"name":"eth0","words":[{"router":"fe80::zz"}]}]}`)
		}, "parse"},
		{"oversized", func(t *testing.T, dir string) { write(t, dir, strings.Repeat(" ", maxMemoryBytes+1)) }, "over"},
		{"stale", func(t *testing.T, dir string) {
			if err := saveMemory(dir, "", aMemory(t0.Add(-2*time.Hour))); err != nil {
				t.Fatal(err)
			}
		}, errStaleMemory.Error()},
		{"without a format (before it was kept)", func(t *testing.T, dir string) {
			b, err := json.Marshal(aMemory(t0))
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, string(b))
		}, ""},
		{"a newer format", func(t *testing.T, dir string) {
			b, err := json.Marshal(memoryOnDisk{Format: memoryFormat + 1, Memory: aMemory(t0)})
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, string(b))
		}, "newer release"},
		{"from the future", func(t *testing.T, dir string) {
			if err := saveMemory(dir, "", aMemory(t0.Add(time.Minute))); err != nil {
				t.Fatal(err)
			}
		}, "after now"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.content(t, dir)
			got, err := loadMemory(dir, "", t0)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("loadMemory: %v", err)
			case c.want == "":
				if diff := cmp.Diff(aMemory(t0), got, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
					t.Errorf("memory (-want +got):\n%s", diff)
				}
			case err == nil || !strings.Contains(err.Error(), c.want):
				t.Errorf("loadMemory: %v, want an error saying %q", err, c.want)
			}
			if c.name == "missing" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
			}
			left, _ := filepath.Glob(filepath.Join(dir, MemoryFile+".*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func write(t *testing.T, dir, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, MemoryFile), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The agent writes its memory when the router's believed word moves, not
// on every RA, and a restarted agent reads it back: the router's word is
// believed before its first RA after the restart.
func TestTheAgentKeepsItsMemoryAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{StartupGrace: 5 * time.Second, StateDir: dir}
	a, rec, clk, _ := startWith(t, cfg, "")
	before := metricMemoryWrites.With("ok").Value()
	for range 30 { // an RA every 4 s for 2 min, lifetimes alike
		a.RA("eth0", router, clk.Now(), []observe.RAPrefix{{Prefix: pA, Valid: time.Hour, Preferred: 30 * time.Minute, Autonomous: true}})
		sync_(a)
		clk.Step(4 * time.Second)
	}
	sync_(a)
	waitPublished(t, rec, clk, "v1;eth0=2001:db8:a::/64 p ra")
	writes := metricMemoryWrites.With("ok").Value() - before
	t.Logf("%d memory writes for 30 RAs over 2 min", writes)
	if writes < 1 || writes > 3 {
		t.Errorf("%v memory writes for 30 RAs over 2 min, want one per minute the ends moved at most (1-3)", writes)
	}
	m, err := loadMemory(dir, "", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Links) != 1 || len(m.Links[0].Words) != 1 || m.Links[0].Words[0].Prefix != pA {
		t.Fatalf("memory written %+v, want routerA's A", m)
	}

	// The restart: a new agent on the same directory, the router silent.
	a2, rec2, clk2, _ := startAt(t, cfg, "v1;eth0=2001:db8:a::/64 p ra", clk.Now())
	sync_(a2)
	clk2.Step(5 * time.Second) // the grace, no RA
	waitPublished(t, rec2, clk2, "v1;eth0=2001:db8:a::/64 p ra")
}

// Agents that share the directory (kubelets in one host's namespaces, or a
// hostPath on shared storage) keep one file each: none reads another's.
func TestEachNodeKeepsItsOwnMemory(t *testing.T) {
	dir := t.TempDir()
	if err := saveMemory(dir, "node1", aMemory(t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := loadMemory(dir, "node2", t0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node2 read node1's memory (err %v)", err)
	}
	if _, err := loadMemory(dir, "node1", t0); err != nil {
		t.Errorf("node1's own memory: %v", err)
	}
	for node, want := range map[string]string{"node1": "routers-node1.json", "": MemoryFile, "../x": MemoryFile, ".hidden": MemoryFile} {
		if got := memoryFile(node); got != want {
			t.Errorf("memoryFile(%q) = %q, want %q", node, got, want)
		}
	}
}
