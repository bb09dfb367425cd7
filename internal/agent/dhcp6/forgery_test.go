package dhcp6

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// The red team's forgeries (issue 42, second pass): client messages in
// the client's name that a server acts on, each dressed to pass for the
// client's own or to be garbage to a strict parser. The client's node
// reports every one; its own messages, retransmitted or relayed, are
// still its own.
func TestTheClientsNodeReportsForgeriesDressedAsItsOwn(t *testing.T) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	// The client's own Renew, as a forger hears it on ff02::1:2.
	renew := clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 0x41, pdA)
	renew.AddOption(dhcpv6.OptElapsedTime(0))
	retransmitted := clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 0x41, pdA)
	retransmitted.AddOption(dhcpv6.OptElapsedTime(3 * time.Second))
	relay := func(m *dhcpv6.Message, times int) []byte {
		var r dhcpv6.DHCPv6 = m
		for range times {
			if r, err = dhcpv6.EncapsulateRelay(r, dhcpv6.MessageTypeRelayForward, net.ParseIP("2001:db8::1"), net.ParseIP("fe80::bad")); err != nil {
				t.Fatal(err)
			}
		}
		return r.ToBytes()
	}
	release := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x77, pdA)
	rapid := clientMessage(dhcpv6.MessageTypeSolicit, id, id.IAID, 0x78, pdX)
	rapid.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionRapidCommit})
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"our own Renew, looped back", renew.ToBytes(), false},
		{"our own Renew retransmitted (another Elapsed Time)", retransmitted.ToBytes(), false},
		{"our own Renew, relayed", relay(renew, 1), false},
		{"a Release under our own Renew's transaction ID", clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x41, pdA).ToBytes(), true},
		{"a Decline under our own Renew's transaction ID", clientMessage(dhcpv6.MessageTypeDecline, id, id.IAID, 0x41, pdA).ToBytes(), true},
		{"a Request for another prefix under our own Renew's transaction ID", clientMessage(dhcpv6.MessageTypeRequest, id, id.IAID, 0x41, pdX).ToBytes(), true},
		{"a Renew for another prefix under our own Renew's transaction ID", clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 0x41, pdX).ToBytes(), true},
		{"a Release in a Relay-Forward", relay(release, 1), true},
		{"a Release in three nested Relay-Forwards", relay(release, 3), true},
		{"a Release nested 40 deep (dhcpd unwraps any depth; past 8 went unheard)", relay(release, 40), true},
		{"our own Renew, nested 40 deep", relay(renew, 40), false},
		{"a Solicit with Rapid Commit for another prefix", rapid.ToBytes(), true},
		{"a Solicit with Rapid Commit, relayed", relay(rapid, 1), true},
		{"a Release with one malformed option (a one-byte Elapsed Time)", malformedRelease(id), true},
		{"a Release whose last option overruns the message", append(release.ToBytes(), 0, 99, 0xff, 0xff, 1), true},
		{"a Release relayed, with malformed options around it", malformedRelay(id), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &Watch{ID: id, Link: "eth0", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			w.holding(pdA)
			w.sending(renew)
			if got := w.Heard(c.b, time.Unix(1e9, 0)); got != c.want {
				t.Errorf("reported %v, want %v", got, c.want)
			}
		})
	}
}

// malformedRelease is a Release of pdA under id with, after its options,
// an Elapsed Time option one byte long: garbage to insomniacslk/dhcp, a
// Release to ISC dhcpd 4.4.3.
func malformedRelease(id Identity) []byte {
	b := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x79, pdA).ToBytes()
	b = append(b, 0, byte(dhcpv6.OptionElapsedTime), 0, 1, 0)
	if _, err := dhcpv6.MessageFromBytes(b); err == nil {
		panic("the library parses it: no differential")
	}
	return b
}

// malformedRelay is malformedRelease in a Relay-Forward whose Interface-Id
// option is one byte short of its stated length... after the Relay Message.
func malformedRelay(id Identity) []byte {
	inner := malformedRelease(id)
	b := append([]byte{byte(dhcpv6.MessageTypeRelayForward), 0}, make([]byte, 32)...)
	b = append(b, 0, byte(dhcpv6.OptionRelayMsg), byte(len(inner)>>8), byte(len(inner)))
	b = append(b, inner...)
	return append(b, 0, byte(dhcpv6.OptionInterfaceID), 0, 4, 1, 2, 3)
}

// Steady junk under the client's DUID (a Release dhcpd drops, every
// quietFor less a second, for a day) neither keeps the warning silent nor
// floods the log: an episode's warning is quiet for quietFor from the
// warning, not from the last message, and a real forgery naming a prefix
// is a new kind, warned at once.
func TestSteadyJunkNeitherSilencesNorFloodsTheWarning(t *testing.T) {
	w, log := loggedWatch(t)
	id := w.ID
	at := time.Unix(1e9, 0)
	noise := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeRelease, TransactionID: dhcpv6.TransactionID{9, 9, 9}}
	noise.AddOption(dhcpv6.OptClientID(id.DUID)) // no server ID, no IA: dhcpd drops it
	const day = 144
	for i := range day {
		w.Heard(noise.ToBytes(), at.Add(time.Duration(i)*(quietFor-time.Second)))
	}
	junk := strings.Count(log.String(), "\n")
	if max := int(day*(quietFor-time.Second)/quietFor) + 1; junk < 2 || junk > max {
		t.Errorf("%d warning lines for a day of junk, want 2 to %d (one per quietFor)", junk, max)
	}
	log.Reset()
	real := clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 0x55, pdA)
	w.Heard(real.ToBytes(), at.Add(day*(quietFor-time.Second)))
	if !strings.Contains(log.String(), pdA.String()) {
		t.Errorf("the real forged Release of %s not warned of after the junk: %q", pdA, log.String())
	}
}

// However many kinds of junk, the Watch remembers at most episodes of
// them, and logs at most that many lines per quietFor.
func TestTheWatchsEpisodesAreCapped(t *testing.T) {
	w, log := loggedWatch(t)
	id := w.ID
	at := time.Unix(1e9, 0)
	reported := 0
	for i := range 1000 {
		a := pdX.Addr().As16()
		a[5], a[6] = byte(i>>8), byte(i)
		p := netip.PrefixFrom(netip.AddrFrom16(a), 56)
		if w.Heard(clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, byte(i), p).ToBytes(), at.Add(time.Duration(i)*time.Second)) {
			reported++
		}
	}
	if reported != 1000 || len(w.warned) > episodes {
		t.Errorf("reported %d of 1000, %d episodes remembered (at most %d)", reported, len(w.warned), episodes)
	}
	// 1000 s is under two quietFor: at most two rounds of episodes logged.
	if lines := strings.Count(log.String(), "\n"); lines > 2*episodes {
		t.Errorf("%d lines logged, want at most %d", lines, 2*episodes)
	}
}

// A server walks every option of a message: options before the Client ID,
// however many, do not hide a Release (the walker once stopped at 64).
func TestOptionsBeforeTheClientIDDoNotHideARelease(t *testing.T) {
	w, _ := loggedWatch(t)
	release := clientMessage(dhcpv6.MessageTypeRelease, w.ID, w.ID.IAID, 9, pdA).ToBytes()
	for _, n := range []int{63, 64, 1000, 16000} {
		m := append([]byte{}, release[:4]...)
		for range n {
			m = append(m, 0x7f, 0x7f, 0, 0) // an empty unknown option
		}
		if !w.Heard(append(m, release[4:]...), time.Unix(1e9, 0)) {
			t.Errorf("a Release behind %d empty options not reported", n)
		}
	}
}

// The Watch's reader plays against any datagram: it never panics, never
// names more than maxPrefixes, and wherever insomniacslk/dhcp parses a
// client message it reads the same type, transaction ID and client DUID
// (it is more lenient, never different). A message's print is the hash of
// its header and of each option walked but Elapsed Time (printOf).
func FuzzReadHeard(f *testing.F) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(clientMessage(dhcpv6.MessageTypeRelease, id, id.IAID, 1, pdA).ToBytes())
	f.Add(clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 2, pdA, pdX).ToBytes())
	f.Add(malformedRelease(id))
	f.Add(malformedRelay(id))
	f.Add([]byte{12, 0})
	timed := clientMessage(dhcpv6.MessageTypeRenew, id, id.IAID, 3, pdA)
	timed.Options.Options = append([]dhcpv6.Option{dhcpv6.OptElapsedTime(time.Second)}, timed.Options.Options...)
	timed.AddOption(dhcpv6.OptElapsedTime(2 * time.Second))
	f.Add(append(timed.ToBytes(), 0, 8, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := readHeard(b, id.IAID)
		if len(h.Named) > maxPrefixes {
			t.Fatalf("%d prefixes named", len(h.Named))
		}
		if ok && !h.Relayed && h.Print != printOf(b) {
			t.Fatal("the print is not the message's hash without its Elapsed Time options")
		}
		m, err := dhcpv6.MessageFromBytes(b)
		if err != nil || !ok || h.Relayed {
			return
		}
		var cid []byte
		if c := m.Options.ClientID(); c != nil {
			cid = c.ToBytes()
		}
		if h.Type != m.MessageType || h.XID != m.TransactionID || !bytes.Equal(h.Client, cid) {
			t.Fatalf("read %v %x %x, the library %v %x %x", h.Type, h.XID, h.Client, m.MessageType, m.TransactionID, cid)
		}
	})
}

// printOf is the hash of client message b's header and of each option
// walked but Elapsed Time, its code and length then its value.
func printOf(b []byte) [sha256.Size]byte {
	print := sha256.New()
	print.Write(b[:4])
	walkOptions(b[4:], func(code uint16, v []byte) bool {
		if dhcpv6.OptionCode(code) != dhcpv6.OptionElapsedTime {
			print.Write(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, code), uint16(len(v))))
			print.Write(v)
		}
		return true
	})
	return [sha256.Size]byte(print.Sum(nil))
}

// loggedWatch is a Watch for the test client holding pdA, logging to the
// buffer returned.
func loggedWatch(t testing.TB) (*Watch, *bytes.Buffer) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	w := &Watch{ID: id, Link: "eth0", Log: slog.New(slog.NewTextHandler(&log, nil))}
	w.holding(pdA)
	return w, &log
}
