package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/renumber/renumber/internal/digest"
)

// Other daemons on a node follow the kernel's addresses too (Cilium's agent,
// kube-router, a second renumber agent during a rollout). vishvananda/netlink
// sends a subscription's initial dump request to the multicast groups it joins,
// so every other listener of those groups - run as root - receives a message
// that is not from the kernel. Such a message must not end the agent's
// subscription (it did: each one cost a resubscription, with backoff, and the
// resubscription's own dump disturbed the other daemon in turn).
//
// And the agent does not do to others what it must not suffer: it lists what
// exists on a socket of its own, so a listener already there sees only the
// kernel's messages while the agent starts.
func TestOtherNetlinkListenersDoNotDisturbTheAgent(t *testing.T) {
	w := newWorld(t, 1)
	node := w.Net.Nodes[0]
	ns, err := netns.GetFromName(node.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ns.Close() }()
	done := make(chan struct{})
	defer close(done)
	var mu sync.Mutex
	var foreign []string // what the listener already there was sent by others
	first := make(chan netlink.AddrUpdate, 64)
	go func() {
		for range first {
		}
	}()
	if err := netlink.AddrSubscribeWithOptions(first, done, netlink.AddrSubscribeOptions{Namespace: &ns, ErrorCallback: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		foreign = append(foreign, err.Error())
	}}); err != nil {
		t.Fatal(err)
	}

	advertise(t, w, prefixA)
	startAgent(t, w, node.Name)
	waitDigest(t, w, node.Name, "A from the RA", has(prefixA, false, digest.SourceRA))
	mu.Lock()
	if len(foreign) != 0 {
		t.Errorf("a listener already in the namespace was sent messages not from the kernel while the agent started: %v", foreign)
	}
	mu.Unlock()

	for range 3 { // another daemon starting, then resubscribing twice
		ch := make(chan netlink.AddrUpdate, 64)
		go func() {
			for range ch {
			}
		}()
		if err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{Namespace: &ns, ListExisting: true}); err != nil {
			t.Fatal(err)
		}
	}

	// A static address after the dumps: once the agent reports it, it has read
	// everything its subscription received before.
	static := netip.MustParsePrefix("2001:db8:99::/64")
	if out, err := exec.Command("ip", "-n", node.NS, "addr", "add", "2001:db8:99::1/64", "dev", "eth0", "nodad").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	waitDigest(t, w, node.Name, "the static address's prefix", has(static, false, digest.SourceAddr))

	b, err := os.ReadFile(filepath.Join(w.Dir, "agent-"+node.Name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(line, "subscription ended") {
			t.Errorf("the agent's netlink subscription was disturbed: %s", line)
		}
	}
	if !strings.Contains(string(b), "not from the kernel") {
		t.Error("the agent logged nothing about the other listener's messages: did the dumps reach it?")
	}
}
