// A name server whose answer is a long CNAME chain: CoreDNS's template
// plugin answering a name's AAAA question with the whole chain and the
// address at its end in one message, last link first - what a hostile or
// misconfigured server can send, where a zone's own lookup would stop
// chasing at ten links.

package world

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// StartChainServer starts a CoreDNS on a loopback address of its own that
// answers name's AAAA question with links CNAMEs (name -> c1.name -> ... ->
// c<links>.name) and the AAAA record addr of the last, each record with ttl,
// listed last first, in one message. Questions counts the writer's
// questions, as for StartNameServer.
func (w *World) StartChainServer(ctx context.Context, label, name string, links int, ttl time.Duration, addr netip.Addr) (*NameServer, error) {
	at, err := loopbackAddr()
	if err != nil {
		return nil, err
	}
	s := &NameServer{Addr: at, Name: name, w: w, log: "dns-" + label + ".log"}
	link := func(i int) string {
		if i == 0 {
			return name
		}
		return fmt.Sprintf("c%d.%s", i, name)
	}
	secs := int(ttl.Seconds())
	rrs := []string{fmt.Sprintf("%s %d IN AAAA %s", link(links), secs, addr)}
	for i := links - 1; i >= 0; i-- {
		rrs = append(rrs, fmt.Sprintf("%s %d IN CNAME %s", link(i), secs, link(i+1)))
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "%s:%d {\n    bind %s\n    template IN AAAA {\n        match ^%s$\n", name, at.Port(), at.Addr(), strings.ReplaceAll(name, ".", `\.`))
	for _, rr := range rrs {
		fmt.Fprintf(&conf, "        answer %q\n", rr)
	}
	conf.WriteString("    }\n    log\n    errors\n}\n")
	s.corefile = filepath.Join(w.Dir, "dns-"+label+".Corefile")
	if err := os.WriteFile(s.corefile, []byte(conf.String()), 0o600); err != nil {
		return nil, err
	}
	bin, err := Bin("coredns")
	if err != nil {
		return nil, err
	}
	if plugins, err := exec.Command(bin, "-plugins").Output(); err != nil || !strings.Contains(string(plugins), "template") {
		return nil, fmt.Errorf("world: %s has no template plugin (%v): make tools builds it with one", bin, err)
	}
	if s.cmd, err = w.spawn("", s.log, bin, "-conf", s.corefile); err != nil {
		return nil, err
	}
	return s, s.awaitRecords(ctx, links+1)
}

// awaitRecords asks (from probeFrom) until the server answers s.Name's AAAA
// question with n records.
func (s *NameServer) awaitRecords(ctx context.Context, n int) error {
	q, err := dnsmessage.NewName(s.Name)
	if err != nil {
		return err
	}
	ask, err := (&dnsmessage.Message{Header: dnsmessage.Header{ID: 42, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: q, Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET}}}).Pack()
	if err != nil {
		return err
	}
	got := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// TCP: the whole chain need not fit a datagram without EDNS(0).
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: probeFrom.AsSlice()}, Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", s.Addr.String())
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		var m dnsmessage.Message
		buf := make([]byte, 1<<16)
		if _, err := c.Write(append([]byte{byte(len(ask) >> 8), byte(len(ask))}, ask...)); err == nil {
			if _, err := io.ReadFull(c, buf[:2]); err == nil {
				k := int(buf[0])<<8 | int(buf[1])
				if _, err := io.ReadFull(c, buf[:k]); err == nil && m.Unpack(buf[:k]) == nil {
					got = len(m.Answers)
				}
			}
		}
		c.Close()
		if got == n {
			return nil
		}
	}
	return fmt.Errorf("world: the chain server %s answers %d records, want %d", s.Addr, got, n)
}
