package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
)

// Guard ranges get unreachable routes in the root namespace (Traffic rule): the
// documentation prefix every test advertises and the world's control ULA.
var guardRanges = []string{"2001:db8::/32", "fd72:6e75::/32"}

// Network is the world's layer-2 segment: a bridge (in a namespace of its own),
// the router, the nodes, and a veth to the root namespace for the API server.
type Network struct {
	w        *World
	Control  netip.Prefix // the /64 the API server and nodes talk over
	HostAddr netip.Addr   // root-namespace end, where the API server listens
	BridgeNS string
	Router   *Router
	Rogue    *Router // created on first use
	Nodes    []*Node
}

// Node is one node namespace. Its uplink is eth0.
type Node struct {
	Name        string
	NS          string
	Link        string
	ControlAddr netip.Addr
	PodRange    netip.Prefix // its Pods' addresses, with real nodes (Options.Kubelets)
}

// Advert is one prefix in a Router Advertisement.
type Advert struct {
	Prefix    netip.Prefix
	Valid     time.Duration // 0 withdraws the prefix (valid lifetime 0)
	Preferred time.Duration // 0 deprecates it
	// NotAutonomous clears the A flag: hosts form no address from it (a
	// router announcing a public prefix that only a prefix translation uses).
	NotAutonomous bool
}

// Router is a namespace running radvd on eth0.
type Router struct {
	net     *Network
	name    string
	NS      string
	Addr    netip.Addr   // its address on the bridge's /64 (the world's control /64)
	clients []netip.Addr // unicast-only RAs to these (rogue router)
	// MulticastAnswers: radvd answers solicitations to all nodes
	// (AdvRASolicitedUnicast off: RFC 4861 6.2.6's held-back answer, no
	// sooner than 3 s after its last multicast RA); set before Advertise.
	MulticastAnswers bool
	// Intervals: radvd's MinRtrAdvInterval and MaxRtrAdvInterval (zero: 3 s
	// and 4 s, RFC 4861's least, so tests need not wait for a periodic RA;
	// radvd's defaults are 198 s and 600 s); set before Advertise.
	Intervals [2]time.Duration
	mu        sync.Mutex
	adverts   []Advert
	radvd     *exec.Cmd
	dhcpd     *exec.Cmd // DelegatePrefixes
}

func newNetwork(ctx context.Context, w *World, nodes int) (*Network, error) {
	idHex := w.ID
	n := &Network{
		w:        w,
		Control:  netip.MustParsePrefix("fd72:6e75:" + idHex + "::/64"),
		HostAddr: netip.MustParseAddr("fd72:6e75:" + idHex + "::1"),
		BridgeNS: "rn" + idHex + "-br",
	}
	for _, g := range guardRanges {
		if err := run(ctx, "ip", "-6", "route", "replace", "unreachable", g); err != nil {
			return nil, fmt.Errorf("guard route: %w", err)
		}
	}
	if err := n.addNS(ctx, n.BridgeNS); err != nil {
		return nil, err
	}
	br := n.BridgeNS
	if err := sysctls(ctx, br, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
		return nil, err
	}
	if err := runAll(ctx,
		[]string{"ip", "-n", br, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0", "mcast_snooping", "0"},
		[]string{"ip", "-n", br, "link", "set", "br0", "up"},
	); err != nil {
		return nil, err
	}
	// Root-namespace end: no RAs accepted, no SLAAC, a static ULA for the API server.
	host := hostLink(idHex)
	if err := runAll(ctx,
		[]string{"ip", "link", "add", host, "type", "veth", "peer", "name", "p-host", "netns", br},
		[]string{"sysctl", "-q", "-w", "net.ipv6.conf." + host + ".accept_ra=0", "net.ipv6.conf." + host + ".autoconf=0", "net.ipv6.conf." + host + ".accept_dad=0"},
		[]string{"ip", "addr", "add", n.HostAddr.String() + "/64", "dev", host, "nodad"},
		[]string{"ip", "link", "set", host, "up"},
		[]string{"ip", "-n", br, "link", "set", "p-host", "master", "br0", "up"},
	); err != nil {
		return nil, err
	}
	var err error
	if n.Router, err = n.newRouter(ctx, "rt", nil); err != nil {
		return nil, err
	}
	for i := 1; i <= nodes; i++ {
		node, err := n.addNode(ctx, i)
		if err != nil {
			return nil, err
		}
		n.Nodes = append(n.Nodes, node)
	}
	return n, nil
}

// hostLink names world id's link in the root namespace: its end of the
// bridge, which carries the API server's address.
func hostLink(id string) string { return "rn" + id + "h" }

func (n *Network) addNS(ctx context.Context, ns string) error {
	if err := run(ctx, "ip", "netns", "add", ns); err != nil {
		return err
	}
	n.w.record(func(s *state) { s.Namespaces = append(s.Namespaces, ns) })
	return run(ctx, "ip", "-n", ns, "link", "set", "lo", "up")
}

// attach creates a veth from the bridge into ns (named eth0 there), applies the
// sysctls before the link comes up, and gives it a control address.
func (n *Network) attach(ctx context.Context, ns, port string, addr netip.Addr, settings ...string) error {
	if err := run(ctx, "ip", "-n", n.BridgeNS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
		return err
	}
	if err := sysctls(ctx, ns, settings...); err != nil {
		return err
	}
	return runAll(ctx,
		[]string{"ip", "-n", ns, "addr", "add", addr.String() + "/64", "dev", "eth0", "nodad"},
		[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		[]string{"ip", "-n", n.BridgeNS, "link", "set", port, "master", "br0", "up"},
	)
}

func (n *Network) addNode(ctx context.Context, i int) (*Node, error) {
	node := &Node{
		Name:        fmt.Sprintf("node%d", i),
		NS:          fmt.Sprintf("rn%s-n%d", n.w.ID, i),
		Link:        "eth0",
		ControlAddr: netip.MustParseAddr(fmt.Sprintf("fd72:6e75:%s::1%d", n.w.ID, i)),
		PodRange:    netip.MustParsePrefix(fmt.Sprintf("fd72:6e75:%s:%x::/64", n.w.ID, 0x100+i)),
	}
	if err := n.addNS(ctx, node.NS); err != nil {
		return nil, err
	}
	err := n.attach(ctx, node.NS, fmt.Sprintf("p-n%d", i), node.ControlAddr, nodeSysctls...)
	return node, err
}

// nodeSysctls make a node's uplink a SLAAC host; new namespaces do not inherit
// them, and they must be set before the link comes up.
var nodeSysctls = []string{
	"net.ipv6.conf.all.forwarding=0",
	"net.ipv6.conf.eth0.forwarding=0",
	"net.ipv6.conf.eth0.accept_ra=2",
	"net.ipv6.conf.eth0.autoconf=1",
	"net.ipv6.conf.eth0.use_tempaddr=0",
	"net.ipv6.conf.eth0.keep_addr_on_down=1",
}

func (n *Network) newRouter(ctx context.Context, name string, clients []netip.Addr) (*Router, error) {
	r := &Router{net: n, name: name, NS: "rn" + n.w.ID + "-" + name, clients: clients}
	if err := n.addNS(ctx, r.NS); err != nil {
		return nil, err
	}
	addr := netip.MustParseAddr("fd72:6e75:" + n.w.ID + "::2")
	if name != "rt" {
		addr = netip.MustParseAddr("fd72:6e75:" + n.w.ID + "::3")
	}
	r.Addr = addr
	err := n.attach(ctx, r.NS, "p-"+name, addr,
		"net.ipv6.conf.all.forwarding=1",
		"net.ipv6.conf.eth0.accept_ra=0",
		"net.ipv6.conf.eth0.accept_dad=0",
	)
	return r, err
}

// Node returns the node named name.
func (n *Network) Node(name string) (*Node, error) {
	for _, node := range n.Nodes {
		if node.Name == name {
			return node, nil
		}
	}
	return nil, fmt.Errorf("world: no node %q", name)
}

// Advertise makes the router advertise exactly these prefixes (starting radvd if
// needed, else reloading it with SIGHUP).
func (r *Router) Advertise(ctx context.Context, ads ...Advert) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.adverts = append([]Advert(nil), ads...)
	conf := filepath.Join(r.net.w.Dir, "radvd-"+r.name+".conf")
	if err := os.WriteFile(conf, []byte(radvdConf(ads, r.clients, r.MulticastAnswers, r.Intervals)), 0o644); err != nil {
		return err
	}
	if err := run(ctx, "radvd", "-c", "-C", conf); err != nil {
		return fmt.Errorf("radvd rejects its config: %w", err)
	}
	if r.radvd != nil {
		return hangUpWhenCaught(ctx, r.radvd.Process)
	}
	return r.start()
}

// hangUpWhenCaught sends p SIGHUP once p catches it. A radvd spawned a moment
// ago may still be ip netns exec, nice, or radvd before its handlers, and
// there SIGHUP's default action ends it: under make test's load a test that
// advertised right after its world's first advertisement was left with no
// router and an empty radvd log (TestDynamicPrefixesSetWhatAgentsReport, twice).
// So wait, a bounded while, until /proc says the process catches SIGHUP.
func hangUpWhenCaught(ctx context.Context, p *os.Process) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		caught, err := catchesHangUp(p.Pid)
		if err != nil {
			return err
		}
		if caught {
			return p.Signal(syscall.SIGHUP)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pid %d never caught SIGHUP: %w", p.Pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// catchesHangUp reads whether pid has a handler for SIGHUP (bit 0 of SigCgt in
// /proc/<pid>/status); a process that has exited is an error.
func catchesHangUp(pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, fmt.Errorf("pid %d is gone: %w", pid, err)
	}
	var caught bool
	for line := range strings.SplitSeq(string(b), "\n") {
		key, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch key {
		case "State":
			if strings.HasPrefix(value, "Z") {
				return false, fmt.Errorf("pid %d has exited", pid)
			}
		case "SigCgt":
			mask, err := strconv.ParseUint(value, 16, 64)
			if err != nil {
				return false, fmt.Errorf("pid %d: SigCgt %q: %w", pid, value, err)
			}
			caught = mask&1 != 0
		}
	}
	return caught, nil
}

// deviceOfItsOwn runs a router's daemons (radvd, dhcpd) ahead of the rest of
// the machine. A real router is a device of its own, whose answers the
// cluster's load does not delay; here it shares two cores with eight worlds,
// and under make test's load radvd was seen silent for over 3 s after a
// solicitation - long past what RFC 4861 lets a router take, so a spoofer's
// answer stood alone and the agents rightly believed it. The agents'
// corroboration assumes a router that answers in time (docs/security.md);
// the world must offer one.
var deviceOfItsOwn = []string{"nice", "-n", "-10"}

func (r *Router) start() error {
	conf := filepath.Join(r.net.w.Dir, "radvd-"+r.name+".conf")
	pid := filepath.Join(r.net.w.Dir, "radvd-"+r.name+".pid")
	cmd, err := r.net.w.spawn(r.NS, "radvd-"+r.name+".log", append(deviceOfItsOwn, "radvd", "-n", "-m", "stderr", "-C", conf, "-p", pid)...)
	if err != nil {
		return err
	}
	r.radvd = cmd
	return nil
}

// Stop stops radvd (the router goes silent; nodes keep what they learnt until
// lifetimes run out).
func (r *Router) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.radvd != nil {
		r.net.w.Stop(r.radvd, 5*time.Second)
		r.radvd = nil
		// radvd's privilege-separation helper is its own process.
		if out, err := exec.Command("ip", "netns", "pids", r.NS).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// Start restarts radvd with the last advertised prefixes.
func (r *Router) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.radvd != nil {
		return nil
	}
	return r.start()
}

// RogueRouter returns a second router whose RAs reach only the given node
// (unicast to its link-local address), or every node when node is "".
func (n *Network) RogueRouter(ctx context.Context, node string) (*Router, error) {
	if n.Rogue != nil {
		return nil, errors.New("world: one rogue router per world")
	}
	var clients []netip.Addr
	if node != "" {
		nd, err := n.Node(node)
		if err != nil {
			return nil, err
		}
		ll, err := nd.LinkLocal(ctx)
		if err != nil {
			return nil, err
		}
		clients = []netip.Addr{ll}
	}
	var err error
	n.Rogue, err = n.newRouter(ctx, "rg", clients)
	return n.Rogue, err
}

// Impostor returns the rogue router (RogueRouter with every node its
// audience) holding the real router's link-local address too, taken with
// nodad as any host on a home switch can: what it sends with
// SendRAFrom(that address) is, on the wire, the router's RA. Only its MAC
// differs, which no RA check on a host can rely on.
func (n *Network) Impostor(ctx context.Context) (*Router, netip.Addr, error) {
	ll, err := n.Router.LinkLocal(ctx)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	rogue, err := n.RogueRouter(ctx, "")
	if err != nil {
		return nil, netip.Addr{}, err
	}
	if err := rogue.AddLinkLocal(ctx, ll); err != nil {
		return nil, netip.Addr{}, err
	}
	return rogue, ll, nil
}

// AddLinkLocal gives the router's eth0 one more link-local address (nodad):
// a flooder's fresh source.
func (r *Router) AddLinkLocal(ctx context.Context, a netip.Addr) error {
	return run(ctx, "ip", "-n", r.NS, "addr", "add", a.String()+"/64", "dev", "eth0", "nodad")
}

// LinkLocal returns the router's link-local address: the source of its RAs.
func (r *Router) LinkLocal(ctx context.Context) (netip.Addr, error) {
	return linkLocal(ctx, r.NS, "eth0")
}

// RadvdConf renders radvd's configuration for eth0 advertising ads (unicast to
// clients only, when given): the same for the local world and the kind router.
func RadvdConf(ads []Advert, clients []netip.Addr) string {
	return radvdConf(ads, clients, false, [2]time.Duration{})
}

func radvdConf(ads []Advert, clients []netip.Addr, multicastAnswers bool, intervals [2]time.Duration) string {
	if intervals[0] == 0 {
		intervals = [2]time.Duration{3 * time.Second, 4 * time.Second}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "interface eth0 {\n\tAdvSendAdvert on;\n\tMinRtrAdvInterval %g;\n\tMaxRtrAdvInterval %g;\n",
		intervals[0].Seconds(), intervals[1].Seconds())
	if multicastAnswers {
		b.WriteString("\tAdvRASolicitedUnicast off;\n")
	}
	// Router lifetime 0: the router is no default gateway, so nothing a node sends to
	// an unknown destination goes anywhere.
	b.WriteString("\tAdvDefaultLifetime 0;\n")
	for _, a := range ads {
		auto := "on"
		if a.NotAutonomous {
			auto = "off"
		}
		fmt.Fprintf(&b, "\tprefix %s {\n\t\tAdvOnLink on;\n\t\tAdvAutonomous %s;\n\t\tAdvValidLifetime %d;\n\t\tAdvPreferredLifetime %d;\n\t};\n",
			a.Prefix, auto, int(a.Valid/time.Second), int(a.Preferred/time.Second))
	}
	if len(clients) > 0 {
		b.WriteString("\tclients {\n")
		for _, c := range clients {
			fmt.Fprintf(&b, "\t\t%s;\n", c)
		}
		b.WriteString("\t};\n")
	}
	b.WriteString("};\n")
	return b.String()
}

// Addr is one IPv6 address on a node's uplink, as the kernel shows it.
type Addr struct {
	Prefix     netip.Prefix // the address with its prefix length
	Deprecated bool
	Tentative  bool
	Valid      time.Duration
	Preferred  time.Duration
}

// Addrs lists the global addresses on the node's uplink.
func (nd *Node) Addrs(ctx context.Context) ([]Addr, error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", nd.NS, "-j", "-6", "addr", "show", "dev", nd.Link, "scope", "global").Output()
	if err != nil {
		return nil, fmt.Errorf("listing addresses of %s: %w", nd.Name, err)
	}
	var links []struct {
		AddrInfo []struct {
			Local      string `json:"local"`
			PrefixLen  int    `json:"prefixlen"`
			Deprecated bool   `json:"deprecated"`
			Tentative  bool   `json:"tentative"`
			Valid      uint32 `json:"valid_life_time"`
			Preferred  uint32 `json:"preferred_life_time"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, err
	}
	var addrs []Addr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			ip, err := netip.ParseAddr(a.Local)
			if err != nil || nd.ControlAddr == ip {
				continue
			}
			addrs = append(addrs, Addr{
				Prefix: netip.PrefixFrom(ip, a.PrefixLen), Deprecated: a.Deprecated, Tentative: a.Tentative,
				Valid: time.Duration(a.Valid) * time.Second, Preferred: time.Duration(a.Preferred) * time.Second,
			})
		}
	}
	return addrs, nil
}

// LinkLocal returns the node's link-local address on its uplink.
func (nd *Node) LinkLocal(ctx context.Context) (netip.Addr, error) {
	return linkLocal(ctx, nd.NS, nd.Link)
}

func linkLocal(ctx context.Context, ns, link string) (netip.Addr, error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-j", "-6", "addr", "show", "dev", link, "scope", "link").Output()
	if err != nil {
		return netip.Addr{}, err
	}
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return netip.Addr{}, err
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("world: %s in %s has no link-local address", link, ns)
}

// Recreate deletes the node's uplink (its veth pair) and creates it again with
// the same settings, as a reprovisioned NIC or a recreated bond would appear.
func (nd *Node) Recreate(ctx context.Context, n *Network) error {
	port := "p-" + strings.TrimPrefix(nd.NS, "rn"+n.w.ID+"-")
	if err := run(ctx, "ip", "-n", nd.NS, "link", "del", nd.Link); err != nil {
		return err
	}
	return n.attach(ctx, nd.NS, port, nd.ControlAddr, nodeSysctls...)
}

// SetLink takes the node's uplink down or up.
func (nd *Node) SetLink(ctx context.Context, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return run(ctx, "ip", "-n", nd.NS, "link", "set", nd.Link, state)
}

// Do runs fn on an OS thread inside the node's network namespace. Sockets opened
// by fn stay in that namespace after it returns. The thread is moved back to the
// original namespace before it is released; if that fails it stays locked, so
// no other goroutine ever runs in the node's namespace (nor, on the main thread,
// does the process appear to live there when the namespace is torn down).
func (nd *Node) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := netns.GetFromName(nd.NS)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		err = fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func sysctls(ctx context.Context, ns string, settings ...string) error {
	if len(settings) == 0 {
		return nil
	}
	return run(ctx, append([]string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w"}, settings...)...)
}

func runAll(ctx context.Context, cmds ...[]string) error {
	for _, c := range cmds {
		if err := run(ctx, c...); err != nil {
			return err
		}
	}
	return nil
}
