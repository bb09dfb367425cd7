package digest

import (
	"fmt"
	"net/netip"
)

// Kind is what happened to a prefix between two digests.
type Kind string

const (
	Appeared   Kind = "appeared"
	Deprecated Kind = "deprecated"
	Preferred  Kind = "preferred again"
	Gone       Kind = "gone"
)

// Change is one line of the agent's journal: a prefix that appeared, turned
// deprecated, was preferred again or went between two digests.
type Change struct {
	Link    string
	Prefix  netip.Prefix
	Kind    Kind
	Sources Source
}

func (c Change) String() string {
	return fmt.Sprintf("%s: prefix %s %s (%s)", c.Link, c.Prefix, c.Kind, c.Sources)
}

// Diff lists what changed from old to new, in link then prefix order.
func Diff(old, new Node) []Change {
	type key struct {
		link   string
		prefix netip.Prefix
	}
	before := map[key]Prefix{}
	for _, l := range old.Links {
		for _, p := range l.Prefixes {
			before[key{l.Name, p.Prefix}] = p
		}
	}
	var out []Change
	for _, l := range new.Links {
		for _, p := range l.Prefixes {
			k := key{l.Name, p.Prefix}
			prev, ok := before[k]
			delete(before, k)
			switch {
			case !ok:
				out = append(out, Change{l.Name, p.Prefix, Appeared, p.Sources})
				if p.Deprecated {
					out = append(out, Change{l.Name, p.Prefix, Deprecated, p.Sources})
				}
			case !prev.Deprecated && p.Deprecated:
				out = append(out, Change{l.Name, p.Prefix, Deprecated, p.Sources})
			case prev.Deprecated && !p.Deprecated:
				out = append(out, Change{l.Name, p.Prefix, Preferred, p.Sources})
			}
		}
	}
	for _, l := range old.Links {
		for _, p := range l.Prefixes {
			if _, ok := before[key{l.Name, p.Prefix}]; ok {
				out = append(out, Change{l.Name, p.Prefix, Gone, p.Sources})
			}
		}
	}
	return out
}
