// Package digest is the contract between the agent and the writer: what one node
// sees of the IPv6 prefixes on its uplinks, in a compact canonical form stored as
// one annotation on its Node.
//
// The encoding is a single line:
//
//	v1;eth0=2001:db8:1:100::/64 p ra+addr,2001:db8:1:200::/64 d1800 ra;eth1=
//
// one "name=entries" group per watched link (sorted by name; empty when the link
// shows nothing), entries sorted by prefix, each "prefix state sources". A link
// where a router's address contradicts itself (two speakers on one address:
// see the agent's corroboration) is "name conflict=entries". The
// state is "p" (preferred) or "d" (deprecated), optionally followed by the valid
// lifetime in seconds that remained when the prefix was first seen deprecated.
// That number is frozen at the transition, so the value never changes while the
// network does not: identical observations encode to identical bytes. An entry
// whose only source is "offer" may follow "p" with the valid lifetime in
// seconds the server stated in its Advertise ("p3600 offer"): relative, so the
// value stays the same while the server's answer does.
package digest

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Annotation is the Node annotation the agent writes and the writer reads.
const Annotation = "dynamic-prefix.io/node-prefixes"

// Version is the first token of every encoded digest.
const Version = "v1"

// Bounds on what a digest may hold. Encode never exceeds them and Decode rejects
// anything beyond them: the writer reads annotations that anyone with node-patch
// rights can write.
const (
	MaxBytes    = 2048
	MaxLinks    = 8
	MaxPrefixes = 32 // across all links
	MaxLifetime = 1<<32 - 1
)

// ErrInvalid is wrapped by every Decode and Encode error.
var ErrInvalid = errors.New("digest: invalid")

// Source says where a prefix was seen. Sources combine as a bit set.
type Source uint8

const (
	// SourceRA: a Prefix Information option in a Router Advertisement.
	SourceRA Source = 1 << iota
	// SourceAddr: a global address the kernel holds on the link.
	SourceAddr
	// SourcePD: a prefix delegated to the node by DHCPv6-PD, as the node's
	// own DHCPv6 client installed it (an unreachable or blackhole route).
	// Writers before v0.2 do not know it: upgrade the writer first.
	SourcePD
	// SourceOffer: a prefix a DHCPv6 server offered (Advertise) to the
	// agent confirming the DynamicPrefix's delegation, which solicits with
	// the client's identity and never requests: nothing is held, and it is
	// never counted as a delegation. Only an agent a writer named confirmer
	// (status.dhcpv6pd.confirmerNode, issue 42) reports it, so older writers
	// never see it.
	SourceOffer

	knownSources = SourceRA | SourceAddr | SourcePD | SourceOffer
)

type sourceName struct {
	s    Source
	name string
}

var sourceNames = []sourceName{{SourceRA, "ra"}, {SourceAddr, "addr"}, {SourcePD, "pd"}, {SourceOffer, "offer"}}

// Prefix is one prefix seen on one link.
type Prefix struct {
	Prefix     netip.Prefix
	Deprecated bool
	// Remaining is the valid lifetime left when the prefix turned deprecated,
	// truncated to seconds; zero when unknown or not deprecated.
	Remaining time.Duration
	// Valid is, for an offer (Sources is SourceOffer alone, preferred),
	// the valid lifetime the server stated in its Advertise, truncated to
	// seconds; zero when unknown (an agent before it) or not an offer. The
	// writer bounds the delegation's drain by it once it is replaced (a
	// client's word alone would keep it as long as it says). Writers
	// before it refuse the digest: upgrade the writer first.
	Valid   time.Duration
	Sources Source
}

// offerOnly reports whether p is an offer that may carry Valid.
func (p Prefix) offerOnly() bool { return p.Sources == SourceOffer && !p.Deprecated }

// Link is what one watched interface shows.
type Link struct {
	Name     string
	Prefixes []Prefix
	// Conflict: RAs from one router address disagree about the prefixes on
	// this link (a second speaker on the router's address); the prefixes are
	// the last agreed state. Writers before v0.3 refuse the digest: upgrade
	// the writer first.
	Conflict bool
}

// conflictMark follows a link's name in the encoding when Link.Conflict.
const conflictMark = " conflict"

// Node is everything one agent reports.
type Node struct {
	Links []Link
}

// Canonical returns n with links sorted by name, prefixes masked and sorted, and
// duplicate prefixes on one link merged (sources combined, deprecated only if
// every report says so).
func (n Node) Canonical() Node {
	var out Node
	for _, l := range n.Links {
		merged := map[netip.Prefix]Prefix{}
		for _, p := range l.Prefixes {
			p.Prefix = p.Prefix.Masked()
			if !p.Deprecated {
				p.Remaining = 0
			}
			p.Remaining = p.Remaining.Truncate(time.Second)
			p.Valid = p.Valid.Truncate(time.Second)
			if prev, ok := merged[p.Prefix]; ok {
				p.Sources |= prev.Sources
				p.Deprecated = p.Deprecated && prev.Deprecated
				p.Remaining = max(p.Remaining, prev.Remaining)
				p.Valid = max(p.Valid, prev.Valid)
				if !p.Deprecated {
					p.Remaining = 0
				}
			}
			if !p.offerOnly() {
				p.Valid = 0
			}
			merged[p.Prefix] = p
		}
		cl := Link{Name: l.Name, Conflict: l.Conflict}
		for _, p := range merged {
			cl.Prefixes = append(cl.Prefixes, p)
		}
		slices.SortFunc(cl.Prefixes, func(a, b Prefix) int { return ComparePrefix(a.Prefix, b.Prefix) })
		out.Links = append(out.Links, cl)
	}
	slices.SortFunc(out.Links, func(a, b Link) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// globalUnicast is 2000::/3, the only range an ISP delegates prefixes from.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// GlobalUnicast reports whether p lies inside 2000::/3. Both sides apply it when
// a DynamicPrefix requires global unicast (the default): the agent leaves other
// prefixes out of the digest, the writer never adopts them. A router offering
// only a unique-local prefix must never look like a renumbering.
func GlobalUnicast(p netip.Prefix) bool {
	return globalUnicast.Contains(p.Addr()) && p.Bits() >= globalUnicast.Bits()
}

// ComparePrefix orders prefixes by address, then by length.
func ComparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Encode returns the canonical encoding of n.
func Encode(n Node) (string, error) {
	n = n.Canonical()
	if len(n.Links) > MaxLinks {
		return "", fmt.Errorf("%w: %d links, at most %d", ErrInvalid, len(n.Links), MaxLinks)
	}
	var b strings.Builder
	b.WriteString(Version)
	total := 0
	for i, l := range n.Links {
		if err := checkLinkName(l.Name); err != nil {
			return "", err
		}
		if i > 0 && l.Name == n.Links[i-1].Name {
			return "", fmt.Errorf("%w: link %q listed twice", ErrInvalid, l.Name)
		}
		b.WriteString(";")
		b.WriteString(l.Name)
		if l.Conflict {
			b.WriteString(conflictMark)
		}
		b.WriteString("=")
		for j, p := range l.Prefixes {
			if err := checkPrefix(p); err != nil {
				return "", err
			}
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString(p.Prefix.String())
			b.WriteString(" ")
			if p.Deprecated {
				b.WriteString("d")
				if p.Remaining > 0 {
					b.WriteString(strconv.FormatInt(int64(p.Remaining/time.Second), 10))
				}
			} else {
				b.WriteString("p")
				if p.Valid > 0 {
					b.WriteString(strconv.FormatInt(int64(p.Valid/time.Second), 10))
				}
			}
			b.WriteString(" ")
			b.WriteString(p.Sources.String())
		}
		total += len(l.Prefixes)
	}
	if total > MaxPrefixes {
		return "", fmt.Errorf("%w: %d prefixes, at most %d", ErrInvalid, total, MaxPrefixes)
	}
	if b.Len() > MaxBytes {
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, b.Len(), MaxBytes)
	}
	return b.String(), nil
}

// Decode parses an encoded digest. It accepts only canonical input, so that a
// value decoded and encoded again is byte-identical.
func Decode(s string) (Node, error) {
	if len(s) > MaxBytes {
		return Node{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(s), MaxBytes)
	}
	groups := strings.Split(s, ";")
	if groups[0] != Version {
		return Node{}, fmt.Errorf("%w: unknown version %q", ErrInvalid, truncate(groups[0]))
	}
	if len(groups)-1 > MaxLinks {
		return Node{}, fmt.Errorf("%w: %d links, at most %d", ErrInvalid, len(groups)-1, MaxLinks)
	}
	var n Node
	total := 0
	for _, g := range groups[1:] {
		name, entries, ok := strings.Cut(g, "=")
		if !ok {
			return Node{}, fmt.Errorf("%w: link group %q has no '='", ErrInvalid, truncate(g))
		}
		name, conflict := strings.CutSuffix(name, conflictMark)
		if err := checkLinkName(name); err != nil {
			return Node{}, err
		}
		l := Link{Name: name, Conflict: conflict}
		if entries != "" {
			for _, e := range strings.Split(entries, ",") {
				total++
				if total > MaxPrefixes {
					return Node{}, fmt.Errorf("%w: more than %d prefixes", ErrInvalid, MaxPrefixes)
				}
				p, err := parseEntry(e)
				if err != nil {
					return Node{}, fmt.Errorf("link %q: %w", name, err)
				}
				l.Prefixes = append(l.Prefixes, p)
			}
		}
		n.Links = append(n.Links, l)
	}
	again, err := Encode(n)
	if err != nil {
		return Node{}, err
	}
	if again != s {
		return Node{}, fmt.Errorf("%w: not in canonical form (want %q)", ErrInvalid, truncate(again))
	}
	return n, nil
}

func parseEntry(e string) (Prefix, error) {
	fields := strings.Split(e, " ")
	if len(fields) != 3 {
		return Prefix{}, fmt.Errorf("%w: entry %q: want 'prefix state sources'", ErrInvalid, truncate(e))
	}
	pfx, err := netip.ParsePrefix(fields[0])
	if err != nil {
		return Prefix{}, fmt.Errorf("%w: entry %q: %v", ErrInvalid, truncate(e), err)
	}
	p := Prefix{Prefix: pfx}
	switch st := fields[1]; {
	case st == "p":
	case strings.HasPrefix(st, "p"):
		secs, err := strconv.ParseUint(st[1:], 10, 32)
		if err != nil || secs == 0 {
			return Prefix{}, fmt.Errorf("%w: entry %q: bad state %q", ErrInvalid, truncate(e), truncate(st))
		}
		p.Valid = time.Duration(secs) * time.Second
	case st == "d":
		p.Deprecated = true
	case strings.HasPrefix(st, "d"):
		secs, err := strconv.ParseUint(st[1:], 10, 32)
		if err != nil || secs == 0 {
			return Prefix{}, fmt.Errorf("%w: entry %q: bad state %q", ErrInvalid, truncate(e), truncate(st))
		}
		p.Deprecated, p.Remaining = true, time.Duration(secs)*time.Second
	default:
		return Prefix{}, fmt.Errorf("%w: entry %q: bad state %q", ErrInvalid, truncate(e), truncate(st))
	}
	src, err := ParseSources(fields[2])
	if err != nil {
		return Prefix{}, fmt.Errorf("entry %q: %w", truncate(e), err)
	}
	p.Sources = src
	if err := checkPrefix(p); err != nil {
		return Prefix{}, err
	}
	return p, nil
}

func checkPrefix(p Prefix) error {
	switch {
	case !p.Prefix.IsValid():
		return fmt.Errorf("%w: invalid prefix", ErrInvalid)
	case !p.Prefix.Addr().Is6() || p.Prefix.Addr().Is4In6() || p.Prefix.Addr().Zone() != "":
		return fmt.Errorf("%w: %s is not an IPv6 prefix", ErrInvalid, p.Prefix)
	case p.Prefix.Bits() == 0:
		return fmt.Errorf("%w: %s has length 0", ErrInvalid, p.Prefix)
	case p.Prefix != p.Prefix.Masked():
		return fmt.Errorf("%w: %s has host bits set", ErrInvalid, p.Prefix)
	case p.Sources == 0 || p.Sources&^knownSources != 0:
		return fmt.Errorf("%w: %s has no known source", ErrInvalid, p.Prefix)
	case p.Remaining < 0 || p.Remaining > MaxLifetime*time.Second:
		return fmt.Errorf("%w: %s remaining lifetime out of range", ErrInvalid, p.Prefix)
	case p.Valid < 0 || p.Valid > MaxLifetime*time.Second:
		return fmt.Errorf("%w: %s valid lifetime out of range", ErrInvalid, p.Prefix)
	case p.Valid > 0 && !p.offerOnly():
		return fmt.Errorf("%w: %s states a valid lifetime, which only an offer carries", ErrInvalid, p.Prefix)
	}
	return nil
}

// checkLinkName accepts what Linux accepts as an interface name, minus the
// characters the encoding uses as separators.
func checkLinkName(name string) error {
	if name == "" || len(name) > 15 {
		return fmt.Errorf("%w: link name %q must be 1 to 15 bytes", ErrInvalid, truncate(name))
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("/:;=,", r) {
			return fmt.Errorf("%w: link name %q has a forbidden character", ErrInvalid, truncate(name))
		}
	}
	return nil
}

// String names the sources, "ra+addr".
func (s Source) String() string {
	var names []string
	for _, sn := range sourceNames {
		if s&sn.s != 0 {
			names = append(names, sn.name)
		}
	}
	if rest := s &^ knownSources; rest != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint8(rest)))
	}
	return strings.Join(names, "+")
}

// ParseSources reads the form String writes. Order and repeats are not checked
// here; Decode's canonical round trip rejects them.
func ParseSources(s string) (Source, error) {
	var out Source
	for _, part := range strings.Split(s, "+") {
		i := slices.IndexFunc(sourceNames, func(sn sourceName) bool { return sn.name == part })
		if i < 0 {
			return 0, fmt.Errorf("%w: unknown source %q", ErrInvalid, truncate(part))
		}
		out |= sourceNames[i].s
	}
	return out, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
