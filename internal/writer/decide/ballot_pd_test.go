package decide

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
)

// pdWorld is FuzzBallot's DHCPv6-PD world (a script whose first byte has its
// top bit set): the agents' own client (mode client) on the link wan, a
// modelled server holding one binding for the DynamicPrefix's identity,
// honest agents that act on the role the last status gives them (the client
// requests or renews and reports what it holds - a binding nobody renews
// within pdValid lapses; the confirmer solicits and reports what
// is offered), and one liar whose digest the fuzzer writes at every step. The
// fuzzer also renumbers the server, turns any node NotReady and back (the liar
// may be first by name, so it becomes the client by being first Ready, or by
// handover), lets time pass (past ConfirmWithin: the roles rotate), and
// starts or stops a second server on the link (a rogue under its own DUID,
// no trustedServers): a Solicit it hears answered by two servers, an honest
// agent takes nothing (dhcp6's two-server rule), so the confirmer is offered
// nothing and a client without a delegation gets none; a Renew names the
// server, and the rogue's answer to it is not heard.
//
// After every pass (the status fed back through the writer's real status
// patch, merged as the API server merges it):
//   - the status stored is the status written;
//   - the decision never asks to be woken at or before now;
//   - safety: the current prefix is one the server delegated at some time -
//     nothing the liar writes, in any role, is adopted;
//   - a replaced delegation drains no longer than the server stated: a
//     delegation an honest confirmer was offered while it was current
//     (the server states pdValid) is pooled, once replaced, with a deadline
//     no later than pdValid after the renumbering, nor than pdValid after
//     an honest node in a role first reported the server giving or
//     offering another while it was current (the server had stopped
//     stating it: a liar client admitting the renumbering late, or a liar
//     confirmer taking the client over late, must not add its delay) -
//     whatever the liar, as the client, says is left of it (2^32-1 s, or
//     no lifetime);
//   - a binding nobody renewed (the liar as client) lapses, and once an
//     honest confirmer is offered the next, the lapse is reported (the
//     status names a disagreement) while the lapsed prefix is current -
//     unless the client agrees on the next (a handover to a client that
//     holds it: the next pass adopts it);
//   - liveness: when the client and the confirmer named are honest and Ready
//     and both hold and are offered the server's binding, the next pass
//     follows it; and at the end of the script, the rogue silent and two
//     honest nodes Ready acting at every pass, the binding is followed
//     within a bound that grows with the nodes (ConfirmWithin each: the
//     rotation).
type pdWorld struct {
	now     time.Time
	bind    netip.Prefix          // the server's binding now (invalid: it lapsed)
	renewed time.Time             // when a client last requested or renewed it
	lapsed  netip.Prefix          // the last binding nobody renewed within pdValid
	gave    map[netip.Prefix]bool // every binding the server made
	serial  int
	honest  []*pdAgent
	liar    *pdAgent
	ballot  *shell
	m       model.Model
	st      Status
	rogue   bool // a second server answers Solicits
	// stated: delegations an honest confirmer was offered while they were
	// current (the server stated pdValid for each).
	stated map[netip.Prefix]bool
	// other: when, while a delegation was current, an honest node in a
	// role first reported the server giving or offering another (the
	// server had stopped stating it then: it drains no longer than pdValid
	// from there, however late the writer switches).
	other map[netip.Prefix]time.Time
	// The server's lifetimes (pdlife_test.go): what it states now, how,
	// and what the binding was last given.
	lifetimes
	// With trustClientAfter (w.m.PDTrustAfter): since when the liar has
	// been the client at every pass, holding a delegation other than the
	// current prefix (zero: it is not); and what it made current so.
	liarUnconfirmed time.Time
	trusted         map[netip.Prefix]bool
	// token: the script's lies are a stolen writer token's status writes
	// (forge), and the liar node never reports (tokenfuzz_test.go).
	token bool
}

type pdAgent struct {
	name             string
	held, offered    netip.Prefix // as last reported (invalid: none)
	offer            offer        // the offer as the agent publishes it (pdlife_test.go)
	notReadySince    time.Time
	digest           string // the liar's
	reported, honest bool
}

// pdValid is the model server's valid lifetime: a binding no client requests
// or renews within it lapses, and the next Solicit or Request gets a new one
// (a server that offers the same prefix again is the case no confirmation
// sees: docs/security.md).
const pdValid = 10 * time.Minute

// server is the binding the server holds now: the one it had, unless it
// lapsed; then a new one (for whoever asks next).
func (w *pdWorld) server() netip.Prefix {
	if w.bind.IsValid() && w.life != infinite && w.now.Sub(w.renewed) >= w.life {
		w.lapsed, w.bind = w.bind, netip.Prefix{}
	}
	if !w.bind.IsValid() {
		w.serial++
		w.bind, w.renewed, w.life = serverPrefix(w.serial), w.now, w.valid
		w.gave[w.bind] = true
	}
	return w.bind
}

func serverPrefix(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x00::/56", 0x10+i%0xe0)) // 256 renumberings wrap
}

// trustAfters are the trustClientAfter a pdWorld may run with (bits 0x30
// of its first byte; none for the corpus from before it).
var trustAfters = []string{"", "3m", "10m", "1h"}

func newPDWorld(n int, liarFirst bool, trustAfter string) *pdWorld {
	w := &pdWorld{now: t0, renewed: t0, gave: map[netip.Prefix]bool{}, stated: map[netip.Prefix]bool{}, other: map[netip.Prefix]time.Time{},
		lifetimes: lifetimes{valid: pdValid, life: pdValid, allowed: map[netip.Prefix]time.Duration{}}, trusted: map[netip.Prefix]bool{}}
	w.m = parse(dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", TrustClientAfter: trustAfter}}})
	w.bind = serverPrefix(0)
	w.gave[w.bind] = true
	name := "x"
	if liarFirst {
		name = "a"
	}
	w.liar = &pdAgent{name: name}
	for i := range n {
		w.honest = append(w.honest, &pdAgent{name: fmt.Sprintf("h%d", i), honest: true, reported: true})
	}
	w.ballot = newShell(5*time.Minute, w.nodes, &noEvents{})
	return w
}

func (w *pdWorld) agents() []*pdAgent { return append([]*pdAgent{w.liar}, w.honest...) }

func (w *pdWorld) roles() (client, confirmer string) {
	if pd := w.st.DHCPv6PD; pd != nil {
		return pd.ClientNode, pd.ConfirmerNode
	}
	return "", ""
}

// act: honest agent i does what its role asks - one exchange with the server.
func (w *pdWorld) act(i int) {
	h := w.honest[i]
	client, confirmer := w.roles()
	if h.name == client {
		if w.rogue && !h.held.IsValid() {
			// It solicits, and two servers answer: nothing is taken.
			h.held = netip.Prefix{}
		} else {
			// It renews what it holds (the Renew names the server; the
			// Reply gives the binding the server has now), or solicits
			// and requests.
			h.held, w.renewed = w.server(), w.now
			w.life = w.valid // the Reply states the lifetime configured now
		}
	}
	if h.name == confirmer {
		h.offered = w.server()
		h.offer = h.offer.advertised(h.offered, w.advertised(), w.now)
		if w.rogue {
			h.offered, h.offer = netip.Prefix{}, offer{}
		}
	}
}

// adoptsNext: the pass d agreed on the server's binding (a handover to a
// client that holds it), and the next pass makes it current.
func (w *pdWorld) adoptsNext(d Decision) bool {
	if !d.Confirm.Agree || !slices.Contains(d.Confirm.Offered, w.bind) {
		return false
	}
	reports, _ := w.ballot.Reports(w.now)
	return For(w.m, w.st, reports, w.now).Current == w.bind
}

// question is what the status asks the confirmer: it solicits again when
// unconfirmed changes (uplink.Client: the prober is poked when Ask does).
type question struct{ confirmer, unconfirmed string }

func (w *pdWorld) asked() question {
	if pd := w.st.DHCPv6PD; pd != nil {
		return question{pd.ConfirmerNode, pd.Unconfirmed}
	}
	return question{}
}

// poke: an honest Ready confirmer asked again solicits at once (its answer
// is in its digest by the next pass).
func (w *pdWorld) poke() {
	_, confirmer := w.roles()
	for i, h := range w.honest {
		if h.name == confirmer && h.notReadySince.IsZero() {
			w.act(i)
		}
	}
}

// settle: an honest agent drops what a role it lost held (the supervisor
// withdraws it when the status names another node).
func (w *pdWorld) settle() {
	client, confirmer := w.roles()
	for _, h := range w.honest {
		if h.name != client {
			h.held = netip.Prefix{}
		}
		if h.name != confirmer {
			h.offered, h.offer = netip.Prefix{}, offer{}
		}
	}
}

// liarTrusted keeps w.liarUnconfirmed for the pass d and reports whether it
// makes current, on the liar's word as the client, past trustClientAfter:
// the liar has been the client at every pass since it first held, as the
// client, a delegation other than the current prefix, for the bound. (The
// writer's episode begins no sooner - it also needs no confirmer to agree -
// and ends no later; the property is the bound.)
func (w *pdWorld) liarTrusted(d Decision, prevCurrent netip.Prefix) bool {
	if w.m.PDTrustAfter == 0 {
		return false
	}
	if d.PDClient != w.liar.name {
		w.liarUnconfirmed = time.Time{}
		return false
	}
	if w.liarUnconfirmed.IsZero() {
		if n, err := digest.Decode(w.liar.digest); err == nil && w.liar.reported {
			for _, l := range n.Links {
				for _, p := range l.Prefixes {
					if l.Name == "wan" && p.Sources&digest.SourcePD != 0 && !p.Deprecated && p.Prefix != prevCurrent {
						w.liarUnconfirmed = w.now
					}
				}
			}
		}
	}
	// The bound as documented, not as trustAfter computes it: the spec's,
	// and never less than three ConfirmWithin (the rotation's turn).
	bound := max(w.m.PDTrustAfter, 3*ConfirmWithin)
	return !w.liarUnconfirmed.IsZero() && d.Current != prevCurrent && w.now.Sub(w.liarUnconfirmed) >= bound
}

func (h *pdAgent) encode(now time.Time) string {
	l := digest.Link{Name: "wan"}
	if h.held.IsValid() {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: h.held, Sources: digest.SourcePD})
	}
	if p := h.offers(now); p.IsValid() {
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: p, Valid: h.offer.valid, Sources: digest.SourceOffer})
	}
	s, err := digest.Encode(digest.Node{Links: []digest.Link{l}})
	if err != nil {
		panic(err)
	}
	return s
}

// lie: the liar's digest, from the script: prefixes the server gives or gave,
// or forged ones, as held, offered, both, or seen in RAs.
func (w *pdWorld) lie(s *[]byte) {
	n := int(next(s)) % 5
	forged := []netip.Prefix{netip.MustParsePrefix("2001:db8:bad::/56"), netip.MustParsePrefix("2001:db8:bad::/48"),
		netip.MustParsePrefix("2001:db8:bad::/64"), netip.MustParsePrefix("fd00::/56")}
	lifetimes := w.liarLifetimes()
	l := digest.Link{Name: "wan", Conflict: n == 4}
	for range n {
		pick, state := int(next(s)), int(next(s))
		p := forged[pick/2%len(forged)]
		if pick%2 == 0 {
			p = serverPrefix(max(w.serial-pick/2%3, 0))
		}
		// Deprecated with any lifetime left, or none; an offer stating
		// any valid lifetime, or none (Canonical drops what does not
		// apply).
		l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: p, Deprecated: state%5 == 4, Remaining: lifetimes[pick/8%len(lifetimes)], Valid: lifetimes[pick/8%len(lifetimes)],
			Sources: []digest.Source{digest.SourcePD, digest.SourceOffer, digest.SourcePD | digest.SourceOffer, digest.SourceRA}[state%4]})
	}
	v, err := digest.Encode(digest.Node{Links: []digest.Link{l}})
	w.liar.digest, w.liar.reported = v, err == nil
}

func (w *pdWorld) nodes() []Node {
	var out []Node
	for _, a := range w.agents() {
		n := Node{Name: a.name, Reported: a.reported, Digest: a.digest}
		if a.honest {
			n.Digest = a.encode(w.now)
		}
		if !a.notReadySince.IsZero() {
			n.NotReadySince = a.notReadySince.Format(time.RFC3339)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pdStatus is the status the writer would write from d.
func pdStatus(d Decision) Status {
	st := status(d)
	st.DHCPv6PD = d.Confirm.Status(d.PDClient)
	return st
}

// stored is live after the writer's status patch for st is merged into it as
// the API server merges it (RFC 7386): what the next pass reads. The
// statuses go to and from their served form (api.Status) as the writer's
// render.Status and render.Prior convert them.
func stored(t *testing.T, live, st Status) Status {
	t.Helper()
	patch, err := api.StatusPatch(served(live), served(st))
	if err != nil {
		t.Fatal(err)
	}
	from, _ := json.Marshal(served(live))
	p, _ := json.Marshal(patch)
	merged, err := jsonpatch.MergePatch(from, p)
	if err != nil {
		t.Fatal(err)
	}
	var got api.Status
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	return plain(got)
}

// served is st as the API serves it: the fields the PD world writes.
func served(st Status) api.Status {
	out := api.Status{CurrentPrefix: st.CurrentPrefix, PrefixSource: st.PrefixSource, DHCPv6PD: st.DHCPv6PD}
	at := func(t time.Time) *metav1.Time {
		if t.IsZero() {
			return nil
		}
		return &metav1.Time{Time: t}
	}
	for _, h := range st.History {
		out.History = append(out.History, api.HistoryEntry{Prefix: h.Prefix, State: h.State,
			AcquiredAt: at(h.AcquiredAt), DeprecatedAt: at(h.DeprecatedAt), ExpiresAt: at(h.ExpiresAt)})
	}
	return out
}

// plain is the served status st read back.
func plain(st api.Status) Status {
	out := Status{CurrentPrefix: st.CurrentPrefix, PrefixSource: st.PrefixSource, DHCPv6PD: st.DHCPv6PD}
	at := func(t *metav1.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return t.Time
	}
	for _, h := range st.History {
		out.History = append(out.History, HistoryEntry{Prefix: h.Prefix, State: h.State,
			AcquiredAt: at(h.AcquiredAt), DeprecatedAt: at(h.DeprecatedAt), ExpiresAt: at(h.ExpiresAt)})
	}
	return out
}

func (w *pdWorld) run(t *testing.T, s *[]byte) {
	for len(*s) > 0 {
		op := next(s)
		if op >= 0xc0 { // the server's lifetime schedule (pdlife_test.go)
			w.schedule(next(s))
			w.step(t)
			continue
		}
		switch op % 6 {
		case 0: // time passes (ConfirmWithin is 2 minutes)
			w.now = w.now.Add(time.Duration(1+int(next(s))) * 5 * time.Second)
		case 1: // the server renumbers: the binding moves
			w.serial++
			w.bind, w.renewed, w.life = serverPrefix(w.serial), w.now, w.valid
			w.gave[w.bind] = true
		case 2: // an honest agent acts on its role, or (top bit) a rogue server starts or stops
			if i := next(s); i&0x80 != 0 {
				w.rogue = !w.rogue
			} else {
				w.act(int(i) % len(w.honest))
			}
		case 3: // every honest agent does
			for i := range w.honest {
				w.act(i)
			}
		case 4: // a node turns NotReady, or Ready again
			a := w.agents()[int(next(s))%(len(w.honest)+1)]
			if a.notReadySince.IsZero() {
				a.notReadySince = w.now
			} else {
				a.notReadySince = time.Time{}
			}
		case 5:
			if w.token {
				w.forge(s) // tokenfuzz_test.go: a stolen writer token, the liar silent
			} else {
				w.lie(s)
			}
		}
		w.step(t)
	}
	w.converge(t)
}

// converge: from here, with every honest agent acting at every pass, nobody
// turning NotReady or Ready, and the liar's digest fixed, the binding is
// followed within a bound - when two honest nodes are Ready (with one, a
// liar in the other role may stall it: reported, and nothing moves).
func (w *pdWorld) converge(t *testing.T) {
	t.Helper()
	ready := 0
	for _, h := range w.honest {
		if h.notReadySince.IsZero() {
			ready++
		}
	}
	if ready < 2 {
		return
	}
	w.rogue = false
	const pass = 30 * time.Second
	start := w.now
	bound := pdValid + time.Duration(len(w.honest)+3)*ConfirmWithin + 4*pass
	for w.now.Sub(start) < bound {
		for i := range w.honest {
			w.act(i)
		}
		w.step(t)
		if w.st.CurrentPrefix == w.server().String() {
			return
		}
		w.now = w.now.Add(pass)
	}
	t.Fatalf("the server's %v not followed %v after every honest agent acts at every pass (current %q, liar %s: %q, status %+v)",
		w.bind, bound, w.st.CurrentPrefix, w.liar.name, w.liar.digest, w.st.DHCPv6PD)
}

func (w *pdWorld) step(t *testing.T) {
	t.Helper()
	reports, _ := w.ballot.Reports(w.now)
	prevCurrent, _ := netip.ParsePrefix(w.st.CurrentPrefix)
	_, read := w.roles() // the confirmer whose digest this pass reads
	if cur, err := netip.ParsePrefix(w.st.CurrentPrefix); err == nil && w.other[cur].IsZero() {
		for _, h := range w.honest {
			if h.held.IsValid() && h.held != cur || h.offers(w.now).IsValid() && h.offers(w.now) != cur {
				w.other[cur] = w.now.Truncate(time.Second)
			}
		}
	}
	// The client before this pass, when it is honest, Ready and holds the
	// server's live binding: the liar must not take the role from it (red
	// team: two nodes besides the client contradicting it is the rule, and
	// an honest confirmer is offered what such a client holds).
	wasClient, _ := w.roles()
	live := w.bind.IsValid() && (w.life == infinite || w.now.Sub(w.renewed) < w.life)
	var heldBy *pdAgent
	for _, h := range w.honest {
		if h.name == wasClient && live && h.held == w.bind && h.notReadySince.IsZero() {
			heldBy = h
		}
	}
	d := For(w.m, w.st, reports, w.now)
	if heldBy != nil && d.PDClient == w.liar.name {
		t.Fatalf("at %v the liar took the client role from honest %s holding the server's live binding %v (liar %q, status %+v)",
			w.now.Sub(t0), heldBy.name, w.bind, w.liar.digest, w.st.DHCPv6PD)
	}
	if i := slices.IndexFunc(w.honest, func(h *pdAgent) bool { return h.name == read }); i >= 0 && d.Current.IsValid() && w.honest[i].offers(w.now) == d.Current {
		w.stated[d.Current] = true
		w.allowed[d.Current] = w.honest[i].offer.valid
	}
	for _, h := range d.History {
		p := netip.MustParsePrefix(h.Prefix)
		if h.State != model.StateDraining || !w.stated[p] || w.allowed[p] == infinite {
			continue // no finite lifetime heard last: nothing bounds it
		}
		from := h.DeprecatedAt
		if at := w.other[p]; !at.IsZero() && at.Before(from) {
			from = at
		}
		if bound := from.Add(w.allowed[p]); h.ExpiresAt.IsZero() || h.ExpiresAt.After(bound) {
			t.Fatalf("at %v %v, replaced at %v, drains until %v: past the %v the server stated (an honest confirmer was offered it while current) from t0+%v\nliar %s: %q\nstatus: %+v",
				w.now.Sub(t0), p, h.DeprecatedAt.Sub(t0), h.ExpiresAt, w.allowed[p], from.Sub(t0), w.liar.name, w.liar.digest, w.st.DHCPv6PD)
		}
	}
	if !d.Wake.IsZero() && !d.Wake.After(w.now) {
		t.Fatalf("at %v the decision asks to be woken at %v, not after now: the writer would pass again at once (status %+v)",
			w.now.Sub(t0), d.Wake.Sub(t0), w.st.DHCPv6PD)
	}
	want := pdStatus(d)
	asked := w.asked()
	w.st = stored(t, w.st, want)
	if diff := cmp.Diff(want, w.st); diff != "" {
		t.Fatalf("at %v the status stored differs from the status written (-written +stored):\n%s", w.now.Sub(t0), diff)
	}
	w.settle()
	if w.liarTrusted(d, prevCurrent) {
		w.trusted[d.Current] = true
	}
	if d.Current.IsValid() && !w.gave[d.Current] && !w.trusted[d.Current] {
		t.Fatalf("at %v current is %v, which the server never delegated (server gave %v)\nliar %s: %q\nreports: %+v\nstatus: %+v",
			w.now.Sub(t0), d.Current, w.gave, w.liar.name, w.liar.digest, reports, w.st.DHCPv6PD)
	}
	client, confirmer := w.roles()
	var c, k *pdAgent
	for _, h := range w.honest {
		if h.name == client {
			c = h
		}
		if h.name == confirmer {
			k = h
		}
	}
	if pd := w.st.DHCPv6PD; k != nil && k.notReadySince.IsZero() && w.lapsed.IsValid() && w.st.CurrentPrefix == w.lapsed.String() &&
		k.offers(w.now) == w.bind && w.bind != w.lapsed && pd.Since == "" && !w.adoptsNext(d) {
		t.Fatalf("at %v the server let %v lapse (nobody renewed it) and honest %s is offered %v, yet the status reports no disagreement: %+v",
			w.now.Sub(t0), w.lapsed, confirmer, w.bind, *pd)
	}
	if c != nil && k != nil && c.notReadySince.IsZero() && k.notReadySince.IsZero() && c.held == w.bind && k.offers(w.now) == w.bind {
		reports, _ := w.ballot.Reports(w.now)
		if again := For(w.m, w.st, reports, w.now); again.Current != w.bind {
			t.Fatalf("at %v honest %s holds and honest %s is offered %v, yet current is %v (liar %s: %q)",
				w.now.Sub(t0), client, confirmer, w.bind, again.Current, w.liar.name, w.liar.digest)
		}
	}
	// Between passes: a confirmer asked again solicits (after this pass's
	// checks, which judge the world the pass read).
	if a := w.asked(); a != asked && a.unconfirmed != "" {
		w.poke()
	}
}
