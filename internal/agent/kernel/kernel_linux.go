package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/renumber/renumber/internal/agent/observe"
	"github.com/renumber/renumber/internal/backoff"
)

type linkState struct {
	index int
	up    bool
}

// Run follows address and link events until ctx ends. A subscription that fails
// or closes is reopened with backoff, listing existing state again.
func (w *Watcher) Run(ctx context.Context) {
	retry := backoff.New(250*time.Millisecond, 30*time.Second)
	for ctx.Err() == nil {
		started := w.Clock.Now()
		err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if w.Clock.Since(started) > time.Minute {
			retry.Reset()
		}
		wait := retry.Next()
		w.Log.Warn("netlink subscription ended; resubscribing", "err", err, "in", wait.Round(time.Millisecond))
		if !backoff.Sleep(ctx, w.Clock, wait) {
			return
		}
	}
}

func (w *Watcher) session(ctx context.Context) error {
	done := make(chan struct{})
	defer close(done)
	errc := make(chan error, 2)
	onErr := func(err error) {
		if strings.HasPrefix(err.Error(), "Wrong sender portid") {
			// Another root process's subscription dump, sent to the groups
			// (vishvananda/netlink does so): the library drops it and carries
			// on, and so do we. A real failure closes the update channel.
			w.Log.Debug("ignoring a netlink message not from the kernel", "err", err)
			return
		}
		select {
		case errc <- err:
		default:
		}
	}
	links := make(chan netlink.LinkUpdate, 64)
	addrs := make(chan netlink.AddrUpdate, 256)
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("kernel: link subscription: %w", err)
	}
	if err := netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("kernel: address subscription: %w", err)
	}
	var routes chan netlink.RouteUpdate // nil (never ready) unless delegations are followed
	if w.H.Delegated != nil {
		routes = make(chan netlink.RouteUpdate, 64)
		// Every route change on the node arrives here (a CNI adding a route
		// per pod, too), though few are delegations: a larger socket buffer
		// (up to net.core.rmem_max) keeps a burst from overflowing it, which
		// would end the session and list everything again.
		if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{ErrorCallback: onErr, ReceiveBufferSize: 1 << 20}); err != nil {
			return fmt.Errorf("kernel: route subscription: %w", err)
		}
	}
	// What exists now is asked on sockets of their own, after subscribing: a
	// change racing the listing arrives on the subscription afterwards and is
	// applied last. (ListExisting would send the dump request to the groups,
	// that is to every other listener in the namespace.)
	names := map[int]string{}
	state := map[string]linkState{}
	ls, err := dump(netlink.LinkList)
	if err != nil {
		return fmt.Errorf("kernel: listing links: %w", err)
	}
	for _, l := range ls {
		w.link(netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_NEWLINK}, Link: l}, names, state)
	}
	as, err := dump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V6) })
	if err != nil {
		return fmt.Errorf("kernel: listing addresses: %w", err)
	}
	for _, a := range as {
		if a.IPNet != nil {
			w.addr(netlink.AddrUpdate{LinkAddress: *a.IPNet, LinkIndex: a.LinkIndex, Flags: a.Flags, Scope: a.Scope,
				PreferedLft: a.PreferedLft, ValidLft: a.ValidLft, NewAddr: true}, names)
		}
	}
	if routes != nil {
		rs, err := dump(func() ([]netlink.Route, error) {
			return netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return fmt.Errorf("kernel: listing routes: %w", err)
		}
		for _, r := range rs {
			w.route(r, false)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-routes:
			if !ok {
				return fmt.Errorf("kernel: route updates closed")
			}
			w.route(u.Route, u.Type == unix.RTM_DELROUTE)
		case err := <-errc:
			return fmt.Errorf("kernel: %w", err)
		case u, ok := <-links:
			if !ok {
				return fmt.Errorf("kernel: link updates closed")
			}
			w.link(u, names, state)
		case u, ok := <-addrs:
			if !ok {
				return fmt.Errorf("kernel: address updates closed")
			}
			if !u.NewAddr {
				w.downFirst(u.LinkIndex, names, state)
			}
			w.addr(u, names)
		}
	}
}

// dump runs a netlink dump again when the kernel interrupted it (the table
// changed while it was read, so the answer may be inconsistent).
func dump[T any](list func() ([]T, error)) ([]T, error) {
	for range 3 {
		out, err := list()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, netlink.ErrDumpInterrupted
}

func (w *Watcher) link(u netlink.LinkUpdate, names map[int]string, state map[string]linkState) {
	attrs := u.Link.Attrs()
	if attrs == nil {
		return
	}
	if u.Header.Type == unix.RTM_DELLINK {
		delete(names, attrs.Index)
		delete(state, attrs.Name)
		return
	}
	names[attrs.Index] = attrs.Name
	now := linkState{index: attrs.Index, up: attrs.Flags&net.FlagUp != 0 && attrs.OperState != netlink.OperDown}
	prev, known := state[attrs.Name]
	state[attrs.Name] = now
	changed := !known || prev.up != now.up || prev.index != now.index
	if changed && (now.up || known) && w.H.Link != nil {
		w.H.Link(attrs.Name, now.up, w.Clock.Now())
	}
}

// downFirst reports a link as down before an address removal on it when the
// link is in fact down. On link down the kernel clears IFF_UP, sends
// RTM_DELADDR for the SLAAC addresses it flushes, and only then RTM_NEWLINK, on
// another socket: without asking, a flush would look like a real removal.
func (w *Watcher) downFirst(index int, names map[int]string, state map[string]linkState) {
	name, ok := names[index]
	if !ok || !state[name].up {
		return
	}
	l, err := netlink.LinkByIndex(index)
	if err == nil && l.Attrs().Flags&net.FlagUp != 0 {
		return
	}
	state[name] = linkState{index: index, up: false}
	if w.H.Link != nil {
		w.H.Link(name, false, w.Clock.Now())
	}
}

func (w *Watcher) addr(u netlink.AddrUpdate, names map[int]string) {
	ip, ok := netip.AddrFromSlice(u.LinkAddress.IP)
	if !ok || !ip.Is6() || ip.Is4In6() || u.Scope != unix.RT_SCOPE_UNIVERSE {
		return
	}
	// A tentative address (DAD in progress, 1-2 s) counts: the kernel formed it
	// from the RA, and waiting for DAD would only delay the one publication a
	// change costs. One that fails DAD will never be usable: it is a removal.
	removed := !u.NewAddr || u.Flags&unix.IFA_F_DADFAILED != 0
	name, ok := names[u.LinkIndex]
	if !ok {
		ifi, err := net.InterfaceByIndex(u.LinkIndex)
		if err != nil {
			return
		}
		name = ifi.Name
		names[u.LinkIndex] = name
	}
	ones, _ := u.LinkAddress.Mask.Size()
	a := observe.Address{
		Addr:       netip.PrefixFrom(ip, ones),
		Valid:      lifetime(u.ValidLft),
		Preferred:  lifetime(u.PreferedLft),
		Deprecated: u.Flags&unix.IFA_F_DEPRECATED != 0,
		// The kernel marks an address configured by hand (or by a tool)
		// without lifetimes permanent; SLAAC's are not, even with infinite
		// lifetimes.
		Permanent: u.Flags&unix.IFA_F_PERMANENT != 0,
	}
	if w.H.Addr != nil {
		w.H.Addr(name, a, removed, w.Clock.Now())
	}
}

// route hands a delegation's route to the agent: an unreachable, blackhole or
// prohibit route in the main table to an IPv6 prefix no longer than /64.
func (w *Watcher) route(r netlink.Route, removed bool) {
	switch r.Type {
	case unix.RTN_UNREACHABLE, unix.RTN_BLACKHOLE, unix.RTN_PROHIBIT:
	default:
		return
	}
	if r.Dst == nil || (r.Table != unix.RT_TABLE_MAIN && r.Table != 0) {
		return
	}
	ip, ok := netip.AddrFromSlice(r.Dst.IP)
	ones, bits := r.Dst.Mask.Size()
	if !ok || bits != 128 || ones == 0 || ones > 64 {
		return
	}
	valid := observe.Infinite
	if r.Expires > 0 {
		valid = time.Duration(r.Expires) * time.Second
	}
	w.H.Delegated(netip.PrefixFrom(ip, ones).Masked(), valid, removed, w.Clock.Now())
}
