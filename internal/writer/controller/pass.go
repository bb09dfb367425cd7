package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// reports are what votes for the DynamicPrefix name: its servers' answers
// when it follows a name (not ready until each was asked once), else the
// node digests, and when that changes by time alone.
func (c *Controller) reports(ctx context.Context, name string, m model.Model, now time.Time) ([]decide.Report, time.Time, bool) {
	switch {
	case m.DNS == nil:
		c.stopResolving(name)
		reports, lapse := c.voters.Reports(now)
		return reports, lapse, true
	case m.Err != nil || c.cfg.Resolvers == nil:
		c.stopResolving(name) // nothing is asked for a spec that cannot be used
		return nil, time.Time{}, true
	}
	reports, ready := c.cfg.Resolvers.Reports(ctx, name, m.DNS)
	return reports, time.Time{}, ready
}

func (c *Controller) stopResolving(name string) {
	if c.cfg.Resolvers != nil {
		c.cfg.Resolvers.Stop(name)
	}
}

// syncDynamicPrefix is one pass over a DynamicPrefix: decide, write every pool,
// Service and advertisement that follows it, then its status (so status
// records what the pools already carry) - but a prefix no object holds yet is
// named in the status before any pool gets it. A pass that writes after a change
// of the nodes' digests counts the time since that change.
func (c *Controller) syncDynamicPrefix(ctx context.Context, name string) (out permit.Outcome) {
	seen, pending := c.changes.take(name)
	before := permit.Written()
	defer func() {
		switch {
		case !pending:
		case out.After > 0:
			c.changes.seen(name, seen) // not done: the writes to come count from the change
		case permit.Written() > before:
			metricLatency.Observe(c.clock.Since(seen).Seconds())
		case out.Retry:
			c.changes.seen(name, seen) // the retry's writes count from the change
		}
	}()
	obj, exists, err := c.caches.DynamicPrefixes().GetByKey(name)
	if err != nil {
		return permit.Transient(err)
	}
	if !exists {
		// Deleted: what was written for it goes (the user's entries stay).
		c.events.Forget("dp/" + name)
		delete(c.problems, name)
		if len(c.overlaps[name]) > 0 {
			c.enqueueAll(0) // those it overlapped report it no more
		}
		delete(c.overlaps, name) // one made again under this name is found anew
		delete(c.admitting, name)
		c.stopResolving(name)
		return c.release(ctx, name).Retry()
	}
	u := obj.(*unstructured.Unstructured)
	if u.GetDeletionTimestamp() != nil {
		// Being deleted, held by the existing operator's finalizer: release
		// first, and only once every release is written, the finalizer.
		out := c.release(ctx, name)
		if out.Err() != nil {
			return out.Retry()
		}
		return append(out, c.write.ReleaseFinalizer(ctx, u)).Retry()
	}
	if c.write.StatusBehind(u) {
		// The cache has not shown our own last status write yet: whatever
		// this pass would write from it is made against a version that is
		// gone. Its watch brings the next pass; lookAgain is the fallback.
		return c.awaitStatus(name)
	}
	dp, err := api.FromUnstructured(u)
	if err != nil {
		c.events.Announce("dp/"+name, u, true, "InvalidObject", err.Error())
		return permit.Final(err) // a fix of the object brings a new event
	}
	dp.Status = c.write.LiveStatus(u, dp.Status)
	prior := dp.Status // what this pass's transitions (events, log lines) are from
	m := model.Parse(name, dp.Spec)
	m.PDTakenBy = TakenBy(m, c.caches.DynamicPrefixes().List())
	if m.PDTakenBy != "" {
		c.events.Announce("dp/"+name+"/pdlink", u, true, render.ReasonInterfaceTaken, render.TakenMessage(m))
	} else {
		c.events.Forget("dp/" + name + "/pdlink")
	}
	now := c.clock.Now()
	reports, lapse, ready := c.reports(ctx, name, m, now)
	if !ready {
		return permit.Outcome{} // the servers' first answers queue the pass again
	}
	d := decide.For(m, render.Prior(dp.Status), reports, now)
	// What this pass writes for: a new spec or new pooled prefixes is a real
	// change, which the write breaker lets through (permit.Budget).
	c.write.Decide(name, fmt.Sprint(u.GetGeneration(), d.Pooled))
	if !lapse.IsZero() && (d.Wake.IsZero() || lapse.Before(d.Wake)) {
		d.Wake = lapse
	}
	for _, rej := range d.Rejected {
		c.events.Announce("reject/"+name+"/"+rej.Prefix.String(), u, true, "PrefixRejected",
			fmt.Sprintf("%s reported by %d node(s) is not adopted: %s", rej.Prefix, rej.Nodes, rej.Reason))
	}

	var problems render.Problems
	problems.Spec = m.Err
	if d.Current.IsValid() {
		problems.Spec = m.Check(d.Current)
	}
	// Another DynamicPrefix handing out addresses where this one does:
	// neither weighs the other's claims (render.PrefixOverlap). Reported
	// here and, by a pass of its own, there: when what this one finds
	// changes from what its last pass found (c.overlaps; the status may
	// not have been written), every DynamicPrefix looks again (rare; a
	// pass that finds the same queues nothing).
	problems.Overlaps = Overlapping(c.caches.DynamicPrefixes().List(), name, render.Space(m, d.Pooled))
	if !slices.EqualFunc(c.overlaps[name], problems.Overlaps, render.Overlap.Equal) { // none found, none before: equal
		c.overlaps[name] = problems.Overlaps
		c.enqueueAll(0)
	}
	var steps, bgp permit.Outcomes
	live := apply.Live{Object: u, Status: dp.Status}
	if d.Current.IsValid() && problems.Spec == nil {
		// A prefix no object holds yet is named in the status first: the
		// admission policy (manifests/writer/policy-values.yaml) lets the
		// writer put into pools and Services only addresses in the prefixes
		// the status names. It is rendered with the last pass's problems,
		// which a renumbering leaves as they were, so the status written
		// after the pools is the same one and is not written again.
		if render.NamesNewPrefix(dp.Status, m, d) || render.DrainsAnew(dp.Status, d) {
			expect := c.problems[name]
			expect.Spec = nil
			var o permit.Outcome
			if live, o = c.write.Status(ctx, live, render.Status(dp, m, d, expect, now)); o.Err != nil {
				return o
			}
			dp.Status = live.Status
			if c.cfg.StatusSeen > 0 && c.cfg.Plan == nil {
				// The objects get the prefix in a pass that sees this
				// status in the cache, once admission admits it too.
				c.admitting[name] = admission{until: now.Add(c.cfg.StatusSeen)}
				return c.awaitStatus(name)
			}
		}
		if o, admitted := c.admission(ctx, name, m, d, now); !admitted {
			return o
		}
		pools := c.caches.Pools()
		cluster, namespaced, others := backends.SplitAllowLists(pools)
		// Allow-lists first; while a cluster-scoped one could not take this
		// pass's prefixes (it is retried), nothing hands an address out of
		// them. A namespaced one's failure holds back only itself.
		steps = c.write.Pools(ctx, cluster, m, d)
		if ctx.Err() != nil {
			return permit.Transient(ctx.Err())
		}
		// A step waiting for its cache (apply.CacheBehind) holds the
		// others back as a failed one does.
		if o := steps.Retry(); o.Err == nil && o.After == 0 {
			steps = append(steps, c.write.Pools(ctx, namespaced, m, d)...)
			steps = append(steps, c.write.Pools(ctx, others, m, d)...)
			if ctx.Err() != nil {
				return permit.Transient(ctx.Err())
			}
			ippools, gvr := c.caches.CalicoPools()
			steps = append(steps, c.ippools.Sync(ctx, ippools, gvr, m, d)...)
			services, conflicts := c.write.Services(ctx, c.caches.Services(), pools, m, d)
			steps, problems.Conflicts = append(steps, services...), conflicts
			adverts, gvr := c.caches.Advertisements()
			problems.BGP, bgp = c.write.Advertisements(ctx, adverts, gvr, pools, u, m)
			problems.BGPErr = bgp.Err()
		} else {
			was := c.problems[name] // not looked at in this pass: as they were
			problems.BGP, problems.BGPErr, problems.Conflicts = was.BGP, was.BGPErr, was.Conflicts
		}
	}
	problems.Pools = steps.Err()
	if problems.Spec != nil {
		c.events.Announce("dp/"+name, u, true, "InvalidSpec", problems.Spec.Error())
	}

	c.problems[name] = problems
	if _, o := c.write.Status(ctx, live, render.Status(dp, m, d, problems, now)); o.Err != nil {
		return o
	}
	switch was := render.QuietStatus(prior); {
	case d.Unreported && !was:
		msg := render.NotReportedMessage(m, d.Current)
		c.log.Warn(name + ": " + msg)
		c.events.Event(u, render.ReasonNotReported, msg)
	case was && !d.Unreported && d.Current.IsValid():
		c.log.Info(fmt.Sprintf("%s: %s reported again", name, d.Current), voterKind(m), d.Reporting)
		c.events.Event(u, "PrefixReported", d.Current.String()+" is reported again")
	}
	switch was := render.InConflict(prior); {
	case len(d.Conflicting) > 0 && !was:
		msg := render.ConflictMessage(d.Conflicting)
		c.log.Warn(name+": "+msg, "nodes", d.Conflicting)
		c.events.Announce("dp/"+name+"/conflict", u, true, render.RouterConflict, msg)
	case was && len(d.Conflicting) == 0:
		c.log.Info(name + ": every node's routers agree again")
		c.events.Announce("dp/"+name+"/conflict", u, false, "RoutersAgree", "every node's routers agree again")
	}
	c.announceDelegation(u, name, d, prior)
	if len(problems.Overlaps) > 0 {
		c.events.Announce("dp/"+name+"/overlap", u, true, render.PrefixOverlap, render.OverlapMessage(problems.Overlaps))
	} else {
		c.events.Forget("dp/" + name + "/overlap")
	}
	if len(problems.Conflicts) > 0 {
		c.events.Announce("dp/"+name+"/services", u, true, render.ServiceAddressConflict, render.ServiceConflictMessage(problems.Conflicts))
	} else {
		c.events.Forget("dp/" + name + "/services")
	}
	if m.DNS != nil {
		c.announceDissent(u, name, m, d, prior)
	}
	if d.Changed && d.Current.IsValid() {
		prev := prior.CurrentPrefix
		if prev == "" {
			prev = "none"
		}
		c.log.Info(fmt.Sprintf("%s: prefix %s -> %s", name, prev, d.Current), voterKind(m), d.Reporting, "pooled", d.Pooled)
		c.events.Announce("dp/"+name+"/prefix", u, false, "PrefixChanged", fmt.Sprintf("following %s (was %s)", d.Current, prev))
	}
	if !d.Wake.IsZero() {
		c.queue.AddAfter(Key{Action: SyncDynamicPrefix, Name: name}, max(d.Wake.Sub(now), minWake))
	}
	return append(steps, bgp...).Retry()
}

// minWake is the soonest a decision's wake queues the next pass. decide
// never asks for one at or before now, but its times come from the status,
// which a stolen token writes: a wake there would pass again at once, and
// again, a busy loop (red team r6b: a since in year 1). A wake a second
// late costs nothing an honest pass needs.
const minWake = time.Second

// voterKind names who votes for a DynamicPrefix, for the log.
func voterKind(m model.Model) string {
	if m.DNS != nil {
		return "servers"
	}
	return "nodes"
}

// announceDissent writes the journal's line and the event when the DNS
// servers stop or start agreeing.
func (c *Controller) announceDissent(u *unstructured.Unstructured, name string, m model.Model, d decide.Decision, prior api.Status) {
	was := meta.FindStatusCondition(prior.Conditions, render.ResolversAgree)
	msg := render.DissentMessage(m, d)
	switch {
	case len(d.Dissent) > 0 && (was == nil || was.Message != msg):
		c.log.Warn(name + ": " + msg)
		c.events.Announce("dp/"+name+"/resolvers", u, true, "ResolversDisagree", msg)
	case len(d.Dissent) == 0 && was != nil && was.Status != metav1.ConditionTrue:
		c.log.Info(name + ": every DNS server answers " + d.Current.String() + " again")
		c.events.Announce("dp/"+name+"/resolvers", u, false, render.ResolversAgree, "every server answers "+d.Current.String())
	}
}

// announceDelegation reports a DHCPv6 client and its confirmer disagreeing
// (a Warning event once per pair of nodes and start, with the details in the
// log), and their agreeing again.
func (c *Controller) announceDelegation(u *unstructured.Unstructured, name string, d decide.Decision, prior api.Status) {
	was := meta.FindStatusCondition(prior.Conditions, render.DelegationConfirmed)
	switch {
	case d.Confirm.Disagrees() && d.Confirm.Trusted.IsZero():
		// (Trusted: the client's word moved the delegation; the
		// ClientTrusted Warning below says so, not "it holds as it was".)
		if was == nil || was.Reason != render.ReasonDisagree {
			c.log.Warn(name+": "+render.DisagreeMessage(d), "client", d.PDClient, "confirmer", d.Confirm.Confirmer)
		} else {
			c.log.Debug(name+": "+render.DisagreeMessage(d), "client", d.PDClient, "confirmer", d.Confirm.Confirmer)
		}
		c.events.Announce("dp/"+name+"/delegation", u, true, render.ReasonDisagree, fmt.Sprintf(
			"DHCPv6 client %s and confirmer %s disagree about the delegation since %s (status.dhcpv6pd, condition %s): it holds as it was",
			d.PDClient, d.Confirm.Confirmer, d.Confirm.Since.UTC().Format(time.RFC3339), render.DelegationConfirmed))
	case was != nil && was.Reason == render.ReasonDisagree && d.Confirm.Agree:
		c.log.Info(name + ": the DHCPv6 client and its confirmer agree again")
		c.events.Announce("dp/"+name+"/delegation", u, false, render.ReasonConfirmed, "DHCPv6 client "+d.PDClient+" and confirmer "+d.Confirm.Confirmer+" agree again")
	}
	if !d.Confirm.Trusted.IsZero() {
		// Once per episode (the message names the client and when):
		// the user's bound, not a confirmation, moves the delegation.
		msg := render.TrustedMessage(d)
		c.events.Announce("dp/"+name+"/trusted", u, true, render.ReasonTrusted, msg)
		if was == nil || was.Reason != render.ReasonTrusted {
			c.log.Warn(name + ": " + msg)
		}
	} else {
		c.events.Forget("dp/" + name + "/trusted")
	}
	if d.PDStalled {
		// Once per stall (the message names the pair and the start):
		// what only the user can settle.
		msg := render.StalledMessage(d)
		c.events.Announce("dp/"+name+"/stall", u, true, render.ReasonStalled, msg)
		if was := meta.FindStatusCondition(prior.Conditions, render.Degraded); was == nil || was.Reason != render.ReasonStalled {
			c.log.Warn(name + ": " + msg)
		}
	} else {
		c.events.Forget("dp/" + name + "/stall")
	}
}

// nodeChanges holds, per DynamicPrefix, when a change of the nodes' digests
// was first seen and no pass has yet handled it.
type nodeChanges struct {
	mu sync.Mutex
	at map[string]time.Time
}

// seen records a change at t for name, unless an older one waits.
func (n *nodeChanges) seen(name string, t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.at == nil {
		n.at = map[string]time.Time{}
	}
	if old, ok := n.at[name]; !ok || t.Before(old) {
		n.at[name] = t
	}
}

// take returns and forgets the change waiting for name.
func (n *nodeChanges) take(name string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.at[name]
	delete(n.at, name)
	return t, ok
}

// release releases everything written for the DynamicPrefix name.
func (c *Controller) release(ctx context.Context, name string) permit.Outcomes {
	adverts, gvr := c.caches.Advertisements()
	out := c.write.ReleaseAll(ctx, c.caches.Pools(), c.caches.Services(), adverts, gvr, name)
	ippools, gvr := c.caches.CalicoPools()
	return append(out, c.ippools.Release(ctx, ippools, gvr, name)...)
}

// lookAgain is when a pass waiting for the cache to show the writer's own
// status write looks again: the watch that shows it queues the pass sooner.
const lookAgain = time.Second

// firstDryRun is the wait before the first dry run is asked again; each
// further one waits twice as long, until Config.StatusSeen is spent (with the
// default 2 s, at most six dry runs: the breaker's default burst and the
// decision's free one).
const firstDryRun = 50 * time.Millisecond

// admission is a DynamicPrefix's status naming a new prefix, written: until
// when its first pool write waits for the API server's admission to admit it,
// and how many dry runs it asked already.
type admission struct {
	until time.Time
	tries int
}

// admission reports whether the objects of the DynamicPrefix name may be
// written in this pass: no status naming a new prefix waits, or the API
// server admits a dry run of the first pool write (apply.Writer.Admitted), or
// the wait is spent. The API server's admission policy reads the status from
// a cache of its own, which lags the writer's under load (a refused pool
// write measured in TestRealNodes beside four other worlds). Not admitted:
// the outcome looks again later; the pass never waits in place.
func (c *Controller) admission(ctx context.Context, name string, m model.Model, d decide.Decision, now time.Time) (permit.Outcome, bool) {
	a, ok := c.admitting[name]
	if !ok {
		return permit.Outcome{}, true
	}
	if !now.Before(a.until) || c.write.Admitted(ctx, c.caches.Pools(), m, d) {
		delete(c.admitting, name)
		return permit.Outcome{}, true
	}
	wait := min(firstDryRun<<a.tries, a.until.Sub(now))
	a.tries++
	c.admitting[name] = a
	return permit.Later(wait), false
}
