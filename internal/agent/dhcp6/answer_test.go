package dhcp6

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

var (
	t0         = time.Unix(1e9, 0)
	samePrefix = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })
)

// leaseOf is pdA from t0+at, valid for valid, the rest in proportion.
func leaseOf(at, valid time.Duration) *Lease {
	return &Lease{Prefix: pdA, At: t0.Add(at), Valid: valid, Preferred: valid / 2, T1: valid / 4, T2: valid / 3}
}

func TestAnswersAgreeOnlyOnTheSameWord(t *testing.T) {
	same := answer{lease: leaseOf(0, time.Hour)}
	for _, c := range []struct {
		name  string
		other answer
		want  bool
	}{
		{"the same", answer{lease: leaseOf(0, time.Hour)}, true},
		{"stated afresh 900 ms later", answer{lease: leaseOf(900*time.Millisecond, time.Hour)}, true},
		{"counted down a second, 500 ms later", answer{lease: leaseOf(500*time.Millisecond, time.Hour-time.Second)}, true},
		{"a lifetime of one second", answer{lease: leaseOf(0, time.Second)}, false},
		{"a lifetime 3 s longer", answer{lease: leaseOf(0, time.Hour+3*time.Second)}, false},
		{"another prefix", answer{lease: &Lease{Prefix: pdB, At: t0, Valid: time.Hour, Preferred: time.Hour / 2, T1: time.Hour / 4, T2: time.Hour / 3}}, false},
		{"another Preference", answer{lease: leaseOf(0, time.Hour), preference: 255}, false},
		{"NoBinding", answer{refusal: errNoBinding}, false},
	} {
		if got := same.agrees(c.other); got != c.want {
			t.Errorf("%s: agrees %v, want %v", c.name, got, c.want)
		}
		if got := c.other.agrees(same); got != c.want {
			t.Errorf("%s, the other way round: agrees %v, want %v", c.name, got, c.want)
		}
	}
	if !(answer{refusal: errNoBinding}).agrees(answer{refusal: errNoBinding}) {
		t.Error("two NoBindings disagree")
	}
	if (answer{refusal: errNoBinding}).agrees(answer{refusal: errors.New("dhcp6: no prefix delegated")}) {
		t.Error("NoBinding agrees with no prefix")
	}
}

func TestAgreeingAnswersEndAtTheEarliest(t *testing.T) {
	x, y := leaseOf(0, time.Hour), leaseOf(time.Second, time.Hour-2*time.Second)
	y.T1 = x.T1 + 500*time.Millisecond
	want := &Lease{Prefix: pdA, At: t0, Valid: time.Hour - time.Second, Preferred: y.Preferred + time.Second, T1: x.T1, T2: x.T2}
	if diff := cmp.Diff(want, merge(x, y), samePrefix); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, merge(y, x), samePrefix); diff != "" {
		t.Errorf("merge, the other way round (-want +got):\n%s", diff)
	}
}

func TestATallyBelievesNoServerThatContradictedItself(t *testing.T) {
	duid := func(b byte) dhcpv6.DUID {
		return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, b}}
	}
	var tl tally
	tl.add(answer{server: duid(1), lease: leaseOf(0, time.Second)})                  // a copier, first
	tl.add(answer{server: duid(2), lease: leaseOf(0, time.Hour)})                    // another server
	tl.add(answer{server: duid(1), lease: leaseOf(100*time.Millisecond, time.Hour)}) // the server itself
	tl.add(answer{server: duid(2), lease: leaseOf(200*time.Millisecond, time.Hour)}) // agreeing
	if got := tl.contradicted(); len(got) != 1 || !got[0].Equal(duid(1)) {
		t.Errorf("contradicted %v, want server 1", got)
	}
	believed := tl.believed()
	if len(believed) != 1 || !believed[0].server.Equal(duid(2)) || believed[0].lease.At != t0 {
		t.Errorf("believed %+v, want server 2's lease from its first answer", believed)
	}
	for i := range 2 * maxServers {
		tl.add(answer{server: duid(byte(10 + i)), lease: leaseOf(0, time.Hour)})
	}
	if len(tl.heard) != maxServers {
		t.Errorf("%d servers kept, want at most %d", len(tl.heard), maxServers)
	}
	tl.add(answer{server: duid(2), refusal: errNoBinding}) // a server already kept is still heard
	if len(tl.contradicted()) != 2 {
		t.Errorf("contradicted %v, want servers 1 and 2", tl.contradicted())
	}
}
