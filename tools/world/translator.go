package world

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Translator is the world's router translating prefixes between the LAN and a
// WAN namespace, as a home router doing NPTv6 does: inside (a ULA prefix on
// the LAN) is mapped onto outside (the ISP's prefix) with Linux's own
// translation - ip6tables SNPT/DNPT (mapping "nptv6") or NETMAP ("netmap").
// The WAN namespace holds one client, ClientAddr, routed through the router.
type Translator struct {
	net        *Network
	WAN        *Node
	ClientAddr netip.Addr
	mapping    string
	inside     netip.Prefix
}

// The WAN link: the router's end and the client's, in a documentation /64
// (behind the root namespace's guard route, like every test prefix).
var (
	wanRouter = netip.MustParseAddr("2001:db8:ffff:ffff::1")
	wanClient = netip.MustParseAddr("2001:db8:ffff:ffff::2")
)

// Translator makes the router translate inside with mapping ("nptv6" or
// "netmap") and creates the WAN namespace. Map sets the outside prefix.
func (n *Network) Translator(ctx context.Context, mapping string, inside netip.Prefix) (*Translator, error) {
	if mapping != "nptv6" && mapping != "netmap" {
		return nil, fmt.Errorf("world: no mapping %q", mapping)
	}
	t := &Translator{net: n, mapping: mapping, inside: inside.Masked(), ClientAddr: wanClient,
		WAN: &Node{Name: "wan", NS: "rn" + n.w.ID + "-wan", Link: "eth0"}}
	if err := n.addNS(ctx, t.WAN.NS); err != nil {
		return nil, err
	}
	rt := n.Router.NS
	err := runAll(ctx,
		[]string{"ip", "-n", rt, "link", "add", "wan0", "type", "veth", "peer", "name", "eth0", "netns", t.WAN.NS},
		[]string{"ip", "netns", "exec", t.WAN.NS, "sysctl", "-q", "-w", "net.ipv6.conf.eth0.accept_ra=0", "net.ipv6.conf.eth0.accept_dad=0"},
		[]string{"ip", "netns", "exec", rt, "sysctl", "-q", "-w", "net.ipv6.conf.wan0.accept_dad=0"},
		[]string{"ip", "-n", rt, "addr", "add", wanRouter.String() + "/64", "dev", "wan0", "nodad"},
		[]string{"ip", "-n", rt, "link", "set", "wan0", "up"},
		[]string{"ip", "-n", t.WAN.NS, "addr", "add", wanClient.String() + "/64", "dev", "eth0", "nodad"},
		[]string{"ip", "-n", t.WAN.NS, "link", "set", "eth0", "up"},
		[]string{"ip", "-n", t.WAN.NS, "-6", "route", "add", "default", "via", wanRouter.String()},
	)
	return t, err
}

// Map makes the router translate inside onto outside (replacing any earlier
// outside prefix): the ISP renumbered.
func (t *Translator) Map(ctx context.Context, outside netip.Prefix) error {
	rt := t.net.Router.NS
	outside = outside.Masked()
	table := "mangle"
	if t.mapping == "netmap" {
		table = "nat"
	}
	ipt := func(args ...string) []string {
		return append([]string{"ip", "netns", "exec", rt, "ip6tables", "-w", "-t", table}, args...)
	}
	cmds := [][]string{ipt("-F", "PREROUTING"), ipt("-F", "POSTROUTING")}
	in, out := t.inside.String(), outside.String()
	if t.mapping == "nptv6" {
		cmds = append(cmds,
			ipt("-A", "POSTROUTING", "-o", "wan0", "-s", in, "-j", "SNPT", "--src-pfx", in, "--dst-pfx", out),
			ipt("-A", "PREROUTING", "-i", "wan0", "-d", out, "-j", "DNPT", "--src-pfx", out, "--dst-pfx", in))
	} else {
		cmds = append(cmds,
			ipt("-A", "POSTROUTING", "-o", "wan0", "-s", in, "-j", "NETMAP", "--to", out),
			ipt("-A", "PREROUTING", "-i", "wan0", "-d", out, "-j", "NETMAP", "--to", in))
	}
	return runAll(ctx, cmds...)
}

// Dial connects from the WAN client to addr:port and returns the line the
// listener answers with.
func (t *Translator) Dial(ctx context.Context, addr netip.Addr, port int) (string, error) {
	var line string
	err := t.WAN.Do(func() error {
		d := net.Dialer{Timeout: 3 * time.Second}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(addr, uint16(port)).String())
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err = bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading from %s: %w", addr, err)
		}
		return nil
	})
	return line, err
}

// Listen starts, in nd's namespace, a TCP listener on addr:port that
// answers each connection with "local remote\n", the addresses it saw. addr
// is added to nd's uplink in its /64, the router takes that /64's first
// address, and nd routes the WAN client through it. It stops with ctx.
func (t *Translator) Listen(ctx context.Context, nd *Node, addr netip.Addr, port int) error {
	gw := netip.PrefixFrom(addr, 64).Masked().Addr().Next()
	if err := runAll(ctx,
		[]string{"ip", "-n", t.net.Router.NS, "addr", "replace", gw.String() + "/64", "dev", "eth0", "nodad"},
		[]string{"ip", "-n", nd.NS, "addr", "add", addr.String() + "/64", "dev", nd.Link, "nodad"},
		[]string{"ip", "-n", nd.NS, "-6", "route", "replace", wanClient.String() + "/128", "via", gw.String(), "src", addr.String()},
	); err != nil {
		return err
	}
	var l net.Listener
	err := nd.Do(func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
		return err
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			fmt.Fprintf(c, "%s %s\n", c.LocalAddr(), c.RemoteAddr())
			c.Close()
		}
	}()
	return nil
}
