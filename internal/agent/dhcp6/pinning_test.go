package dhcp6

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// Any host on the link can answer a DHCPv6 client (lessons.md, "A hostile
// LAN"): these pin the server and corroborate what changes a lease.

var pdX = netip.MustParsePrefix("2001:db8:bad::/56")

func TestOnlyATrustedServerIsHeard(t *testing.T) {
	s := newServer(t, always(pdA))
	s.setForge(func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode) { return pdX, iana.StatusSuccess })
	r, _, _ := startClientWith(t, s, func(c *Client) { c.Servers = [][]byte{s.id.ToBytes()} })
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want the trusted server's %s", got, pdA)
	}
}

func TestNoTrustedServerNoDelegation(t *testing.T) {
	s := newServer(t, always(pdA))
	r, _, _ := startClientWith(t, s, func(c *Client) { c.Servers = [][]byte{forger.ToBytes()} })
	select {
	case got := <-r.ch:
		t.Fatalf("bound %v from a server not trusted", got)
	case <-time.After(3 * time.Second):
	}
	if n := len(s.types()); n < 2 || slices.Contains(s.types(), dhcpv6.MessageTypeRequest) {
		t.Errorf("messages %v: want Solicits only", s.types())
	}
}

func TestTheMostPreferredAdvertiseWins(t *testing.T) {
	l := func(p netip.Prefix, preference uint8) answer {
		return answer{lease: &Lease{Prefix: p}, preference: preference}
	}
	refusal := answer{refusal: errNoBinding, preference: 255}
	for _, c := range []struct {
		name   string
		offers []answer
		want   netip.Prefix
	}{
		{"one", []answer{l(pdA, 0)}, pdA},
		{"the higher preference", []answer{l(pdX, 10), l(pdA, 200)}, pdA},
		{"the first among equals", []answer{l(pdA, 7), l(pdX, 7)}, pdA},
		{"255 over everything", []answer{l(pdX, 254), l(pdA, 255)}, pdA},
		{"a refusal is no offer", []answer{refusal, l(pdA, 0)}, pdA},
	} {
		if got := best(c.offers).Prefix; got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestARenewReplyChangingThePrefixIsTakenFromOneRenew(t *testing.T) {
	s := newServer(t, untilRenewed(always(pdA), always(pdB))) // the server renumbers the delegation itself
	r, _, _ := startClient(t, s)
	if got := r.next(t); got != (report{pdA, false}) {
		t.Fatalf("got %v, want %s bound", got, pdA)
	}
	if got := r.next(t); got != (report{pdA, true}) {
		t.Fatalf("got %v, want %s withdrawn", got, pdA)
	}
	if got := r.next(t); got != (report{pdB, false}) {
		t.Fatalf("got %v, want %s", got, pdB)
	}
	types := s.types()
	if i := slices.Index(types, dhcpv6.MessageTypeRenew); i < 0 || slices.Contains(types[i:], dhcpv6.MessageTypeSolicit) {
		t.Errorf("messages %v: want the change taken from the Renew, no Solicit", types)
	}
}

// A Renew names its server: another server's Reply to it is not heard.
// (A forger that copies the server's DUID is copier_test.go's.)
func TestARenewReplyFromAnotherServerIsNotHeard(t *testing.T) {
	for name, forged := range map[string]func(*dhcpv6.Message) (netip.Prefix, iana.StatusCode){
		"another prefix": func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
			if m.MessageType == dhcpv6.MessageTypeRenew {
				return pdX, iana.StatusSuccess
			}
			return netip.Prefix{}, iana.StatusSuccess
		},
		"NoBinding": func(m *dhcpv6.Message) (netip.Prefix, iana.StatusCode) {
			if m.MessageType == dhcpv6.MessageTypeRenew {
				return netip.Prefix{}, iana.StatusNoBinding
			}
			return netip.Prefix{}, iana.StatusSuccess
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, always(pdA))
			s.setForge(forged) // it answers Renews alone: the first binding is the server's
			r, _, _ := startClient(t, s)
			// The real server keeps renewing pdA; the forger answers first every time.
			deadline := time.After(6 * time.Second)
			for {
				select {
				case got := <-r.ch:
					if got != (report{pdA, false}) {
						t.Fatalf("got %v: the forged answer moved the lease", got)
					}
					continue
				case <-deadline:
				}
				break
			}
			if slices.Contains(s.types()[2:], dhcpv6.MessageTypeSolicit) {
				t.Errorf("messages %v: a forged answer made the client solicit anew", s.types())
			}
		})
	}
}
