// A NameServer is a real DNS server (CoreDNS, as kind runs it) on loopback,
// answering one name's AAAA records from a hosts file it rereads: the dynamic
// DNS record a router keeps updated (acquisition.dns), or a server that lies.

package world

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// NameServer is one CoreDNS.
type NameServer struct {
	Addr       netip.AddrPort
	Name       string // the name it answers, fully qualified
	w          *World
	cmd        *exec.Cmd
	hosts, log string
	corefile   string
	answers    []netip.Addr
}

// probeFrom is the loopback address the world's own checks ask from, so that
// Questions counts only the writer's (which asks from 127.0.0.1).
var probeFrom = netip.MustParseAddr("127.0.0.2")

// StartNameServer starts a CoreDNS answering name (fully qualified) with
// addrs, each record with ttl, on a loopback address of its own (loopbackAddr).
func (w *World) StartNameServer(ctx context.Context, label, name string, ttl time.Duration, addrs ...netip.Addr) (*NameServer, error) {
	addr, err := loopbackAddr()
	if err != nil {
		return nil, err
	}
	s := &NameServer{Addr: addr, Name: name, w: w,
		hosts: filepath.Join(w.Dir, "dns-"+label+".hosts"), log: "dns-" + label + ".log"}
	if err := s.write(addrs); err != nil {
		return nil, err
	}
	corefile := filepath.Join(w.Dir, "dns-"+label+".Corefile")
	s.corefile = corefile
	conf := fmt.Sprintf(`%s:%d {
    bind %s
    hosts %s {
        ttl %d
        reload 100ms
        no_reverse
    }
    log
    errors
}
`, name, addr.Port(), addr.Addr(), s.hosts, int(ttl.Seconds()))
	if err := os.WriteFile(corefile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return s, s.Restart(ctx)
}

// Restart starts the server again after Stop, on its port, answering as it
// did.
func (s *NameServer) Restart(ctx context.Context) error {
	bin, err := Bin("coredns")
	if err != nil {
		return err
	}
	if s.cmd, err = s.w.spawn("", s.log, bin, "-conf", s.corefile); err != nil {
		return err
	}
	return s.await(ctx, s.answers)
}

func (s *NameServer) write(addrs []netip.Addr) error {
	s.answers = addrs
	var b strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&b, "%s %s\n", a, s.Name)
	}
	tmp := s.hosts + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.hosts)
}

// Answer makes the server answer addrs from now on (none: no record), and
// returns once it does.
func (s *NameServer) Answer(ctx context.Context, addrs ...netip.Addr) error {
	if err := s.write(addrs); err != nil {
		return err
	}
	return s.await(ctx, addrs)
}

// await asks (from probeFrom) until the server answers addrs.
func (s *NameServer) await(ctx context.Context, addrs []netip.Addr) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.UDPAddr{IP: probeFrom.AsSlice()}}
		if strings.HasPrefix(network, "tcp") {
			d.LocalAddr = &net.TCPAddr{IP: probeFrom.AsSlice()}
		}
		return d.DialContext(ctx, network, s.Addr.String())
	}}
	want := slices.Clone(addrs)
	slices.SortFunc(want, netip.Addr.Compare)
	var got []netip.Addr
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		got, err = r.LookupNetIP(ctx, "ip6", s.Name)
		slices.SortFunc(got, netip.Addr.Compare)
		if slices.Equal(got, want) || len(want) == 0 && len(got) == 0 && err != nil {
			return nil
		}
	}
	return fmt.Errorf("world: the name server %s answers %v (%v), want %v", s.Addr, got, err, want)
}

// Questions counts the AAAA questions for its name asked by anyone but the
// world itself.
func (s *NameServer) Questions() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.w.Dir, s.log))
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, `"AAAA IN `+s.Name+" ") && !strings.Contains(line, "] "+probeFrom.String()+":") {
			n++
		}
	}
	return n, nil
}

// Stop ends the server: it answers nothing any more.
func (s *NameServer) Stop() { s.w.Stop(s.cmd, 5*time.Second) }
