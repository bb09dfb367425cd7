// Package vethtest gives a test a link of its own: a veth pair, rx and tx,
// in a network namespace made for the test and deleted after it. The
// agent's listeners read on rx, the test speaks on tx, and no packet leaves
// the namespace. It needs root; without it the test is skipped.
package vethtest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"
)

// Pair is the veth pair rx-tx in its namespace.
type Pair struct {
	name string
	ns   netns.NsHandle
}

// New makes the namespace (named for prefix and the test process) and the
// pair, both ends up. Duplicate address detection is off, so each end's
// link-local address is usable at once, and RAs configure nothing.
func New(t testing.TB, prefix string) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	p := &Pair{name: fmt.Sprintf("%s-%d", prefix, os.Getpid())}
	if out, err := exec.Command("ip", "netns", "add", p.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.name).Run() })
	if out, err := exec.Command("ip", "netns", "exec", p.name, "sysctl", "-q", "-w",
		"net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.default.accept_ra=0").CombinedOutput(); err != nil {
		t.Fatalf("sysctl: %v: %s", err, out)
	}
	p.link(t)
	var err error
	if p.ns, err = netns.GetFromName(p.name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.ns.Close() })
	return p
}

func (p *Pair) link(t testing.TB) {
	t.Helper()
	p.IP(t, "link", "add", "rx", "type", "veth", "peer", "name", "tx")
	p.IP(t, "link", "set", "dev", "rx", "up")
	p.IP(t, "link", "set", "dev", "tx", "up")
}

// Recreate deletes the pair and makes it again under the same names (new
// indexes), as when an uplink is re-created.
func (p *Pair) Recreate(t testing.TB) {
	t.Helper()
	p.IP(t, "link", "del", "rx")
	p.link(t)
}

// IP runs ip(8) in the namespace and returns its output.
func (p *Pair) IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", p.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

// Do runs f on a thread in the namespace and waits for it; its error fails
// the test. Sockets stay in the namespace they were made in; the thread
// dies with its goroutine.
func (p *Pair) Do(t testing.TB, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	p.Go(t, func() { done <- f() })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Go starts f on a thread in the namespace and returns once the thread is
// there, for what runs on (a listener).
func (p *Pair) Go(t testing.TB, f func()) {
	t.Helper()
	entered := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(p.ns); err != nil {
			entered <- err
			return
		}
		entered <- nil
		f()
	}()
	if err := <-entered; err != nil {
		t.Fatal(err)
	}
}
