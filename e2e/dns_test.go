package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/internal/writer/resolve"
	"github.com/renumber/renumber/tools/world"
)

// nameServers starts n CoreDNS servers answering name with addr, records
// with ttl.
func nameServers(t *testing.T, w *world.World, n int, name string, ttl time.Duration, addr netip.Addr) []*world.NameServer {
	t.Helper()
	var out []*world.NameServer
	for i := range n {
		s, err := w.StartNameServer(t.Context(), fmt.Sprintf("%s-%d", strings.TrimSuffix(name, "."), i+1), name, ttl, addr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func answer(t *testing.T, addr netip.Addr, servers ...*world.NameServer) {
	t.Helper()
	for _, s := range servers {
		if err := s.Answer(t.Context(), addr); err != nil {
			t.Fatal(err)
		}
	}
}

func questions(t *testing.T, s *world.NameServer) int {
	t.Helper()
	n, err := s.Questions()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// resolversAgree waits until condition ResolversAgree of home is status
// (and its message holds each of want).
func resolversAgree(t *testing.T, w *world.World, status string, want ...string) {
	t.Helper()
	eventually(t, "ResolversAgree "+status+" "+strings.Join(want, ", "), func() (bool, string) {
		for _, c := range dpStatus(t, w, "home").Conditions {
			if c.Type == render.ResolversAgree {
				ok := string(c.Status) == status
				for _, s := range want {
					ok = ok && strings.Contains(c.Message, s)
				}
				return ok, string(c.Status) + " " + c.Message
			}
		}
		return false, "no ResolversAgree condition"
	})
}

func poolWrites(writes []string) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w, "patch ciliumloadbalancerippools lb ") {
			n++
		}
	}
	return n
}

// TestAPublicPrefixIsFollowedByTheRoutersName: behind NPTv6 the LAN never
// carries the ISP's prefix; the router keeps a dynamic DNS name on an
// address in it. Three real DNS servers (CoreDNS) answer that name; the
// DynamicPrefix follows the /48 they answer, asking each again when the TTL
// runs out and never sooner, with no write while nothing changes. The
// record moves on two servers while the third still answers the old one:
// the pool follows in one write and the status names the third. A server
// that lies, or falls silent, moves nothing: with two of three silent, the
// one left cannot move the prefix alone. A second DynamicPrefix whose record
// has a TTL of an hour is asked once in all that time.
func TestAPublicPrefixIsFollowedByTheRoutersName(t *testing.T) {
	w := newWorld(t, 1)
	const name = "router.example.net."
	const ttl = 2 * time.Second
	routerA, routerB := netip.MustParseAddr("2001:db8:1:ff::1"), netip.MustParseAddr("2001:db8:2:ff::1")
	routerC, lie := netip.MustParseAddr("2001:db8:3:ff::1"), netip.MustParseAddr("2001:db8:bad:ff::1")
	ns := nameServers(t, w, 3, name, ttl, routerA)
	slow := nameServers(t, w, 1, "slow.example.net.", time.Hour, routerA)[0]

	createDP(t, w, "home", map[string]any{"acquisition": map[string]any{"dns": map[string]any{
		"name": name, "prefixLength": 48, "minInterval": "1s",
		"servers": []any{ns[0].Addr.String(), ns[1].Addr.String(), ns[2].Addr.String()}}}})
	createDP(t, w, "slow", map[string]any{"acquisition": map[string]any{"dns": map[string]any{
		"name": slow.Name, "prefixLength": 48, "servers": []any{slow.Addr.String()}}}})
	createPool(t, w)
	startWriter(t, w, "writer-a")
	poolIs(t, w, "the pool follows A", "2001:db8:1::/48")
	resolversAgree(t, w, "True")
	if st := dpStatus(t, w, "home"); st.PrefixSource != "dns" {
		t.Errorf("prefixSource %q, want dns", st.PrefixSource)
	}
	eventually(t, "slow follows A", func() (bool, string) {
		st := dpStatus(t, w, "slow")
		return st.CurrentPrefix == "2001:db8:1::/48", st.CurrentPrefix
	})
	answer(t, routerB, slow) // not asked again for an hour (maxInterval 10m)
	settleWrites()

	// Steady: the writer keeps asking, once per TTL at most, and writes
	// nothing - even when a node's digest names another prefix (a node's word
	// never counts for a name; here the only node would be a majority).
	m := mark(t, w)
	forged := fmt.Sprintf(`{"metadata":{"annotations":{%q:"v1;eth0=2001:db8:bad::/48 p ra"}}}`, digest.Annotation)
	if _, err := w.API.Client.CoreV1().Nodes().Patch(t.Context(), "node1", types.MergePatchType, []byte(forged), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	start, asked := time.Now(), questions(t, ns[0])
	eventually(t, "the writer asks again", func() (bool, string) {
		n := questions(t, ns[0])
		return n >= asked+2, fmt.Sprint(n - asked)
	})
	time.Sleep(3 * time.Second)
	elapsed, n := time.Since(start), questions(t, ns[0])-asked
	if most := int(elapsed/ttl) + 1; n > most {
		t.Errorf("%d questions in %v with a TTL of %v: at most %d", n, elapsed.Round(time.Millisecond), ttl, most)
	}
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("asking with nothing changed wrote %q", got)
	}

	// The record moves on two servers; the third still answers A.
	m = mark(t, w)
	answer(t, routerB, ns[0], ns[1])
	poolIs(t, w, "the pool follows B, A draining", "2001:db8:2::/48", "2001:db8:1::/48")
	resolversAgree(t, w, "False", ns[2].Addr.String()+": answers another prefix")
	settleWrites()
	if got := objectWrites(writesBy(t, w, m, writerUser)); poolWrites(got) != 1 {
		t.Errorf("the move wrote %q: want the pool once", got)
	}

	// The third lies instead: nothing is written (the same dissent).
	m = mark(t, w)
	answer(t, lie, ns[2])
	time.Sleep(3 * ttl)
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("a lying server wrote %q", got)
	}
	out := status(t, statusIdentity(t, w), "home")
	for _, want := range []string{"dns name", name, ns[0].Addr.String(), "answers 2001:db8:2::/48", "2 of 3 servers answer"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl renumber status lacks %q:\n%s", want, out)
		}
	}

	// Two of three fall silent; the one left answers C: it cannot move the
	// prefix alone.
	ns[1].Stop()
	ns[2].Stop()
	resolversAgree(t, w, "False", ns[1].Addr.String()+": no answer", ns[2].Addr.String()+": no answer")
	m = mark(t, w)
	answer(t, routerC, ns[0])
	resolversAgree(t, w, "False", ns[0].Addr.String()+": answers another prefix")
	time.Sleep(3 * ttl)
	if got := objectWrites(writesBy(t, w, m, writerUser)); poolWrites(got) != 0 {
		t.Errorf("one server of three moved the pool: %q", got)
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != "2001:db8:2::/48" {
		t.Errorf("one server of three moved the prefix to %s", st.CurrentPrefix)
	}

	// A second comes back, and answers C: a majority; the pool follows.
	if err := ns[1].Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	answer(t, routerC, ns[1])
	poolIs(t, w, "the pool follows C", "2001:db8:3::/48", "2001:db8:2::/48", "2001:db8:1::/48")

	// All this while, the hour-long record was asked once.
	if n := questions(t, slow); n != 1 {
		t.Errorf("the name with a TTL of an hour was asked %d times, want once", n)
	}
	if st := dpStatus(t, w, "slow"); st.CurrentPrefix != "2001:db8:1::/48" {
		t.Errorf("slow follows %s before its TTL ran out, want A still", st.CurrentPrefix)
	}
}

// TestACNAMEChainLongerThanEightIsRefused (issue 42): a real DNS server
// (CoreDNS) answers the router's name with a chain of 20 CNAMEs and an
// address at its end, in one message, last link first. The writer follows
// no more than 8 links: the DynamicPrefix adopts nothing, and its condition
// ResolversAgree says why ("a CNAME chain longer than 8"), written once;
// the server is asked again no faster than the spec's minInterval (an
// answer read as no address states no TTL to wait), and nothing more is
// written while it keeps answering so. Beside it, a chain of 8 links is
// followed.
func TestACNAMEChainLongerThanEightIsRefused(t *testing.T) {
	w := newWorld(t, 1)
	const ttl = 2 * time.Second
	long, err := w.StartChainServer(t.Context(), "long", "router.example.net.", 20, ttl, netip.MustParseAddr("2001:db8:1:ff::1"))
	if err != nil {
		t.Fatal(err)
	}
	short, err := w.StartChainServer(t.Context(), "short", "short.example.net.", 8, ttl, netip.MustParseAddr("2001:db8:2:ff::1"))
	if err != nil {
		t.Fatal(err)
	}
	for dp, s := range map[string]*world.NameServer{"home": long, "short": short} {
		createDP(t, w, dp, map[string]any{"acquisition": map[string]any{"dns": map[string]any{
			"name": s.Name, "prefixLength": 48, "minInterval": "1s", "servers": []any{s.Addr.String()}}}})
	}
	createPool(t, w)
	startWriter(t, w, "writer-a")
	eventually(t, "short follows its 8-link chain", func() (bool, string) {
		st := dpStatus(t, w, "short")
		return st.CurrentPrefix == "2001:db8:2::/48", st.CurrentPrefix
	})
	resolversAgree(t, w, "False", long.Addr.String()+": "+resolve.ProblemChain)
	settleWrites()

	m := mark(t, w)
	const minInterval = time.Second
	start, asked := time.Now(), questions(t, long)
	time.Sleep(10 * minInterval)
	elapsed, n := time.Since(start), questions(t, long)-asked
	if most := int(elapsed/minInterval) + 1; n > most || n == 0 {
		t.Errorf("%d questions in %v with minInterval %v: want 1 to %d", n, elapsed.Round(time.Millisecond), minInterval, most)
	}
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("a server that keeps answering the long chain wrote %q", got)
	}
	if st := dpStatus(t, w, "home"); st.CurrentPrefix != "" {
		t.Errorf("the long chain's address was adopted: %s", st.CurrentPrefix)
	}
	if got := blocks(t, w, "lb"); !slices.Equal(got, []string{"192.0.2.0/24"}) {
		t.Errorf("the pool holds %v, want the user's block alone", got)
	}
	t.Logf("%d questions in %v", n, elapsed.Round(time.Millisecond))
}
