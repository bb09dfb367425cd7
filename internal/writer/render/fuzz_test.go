package render

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Whatever a user (or anyone who may edit the object) writes into a pool's
// entries and its ownership record: no user entry is ever removed or
// rewritten, every desired entry is there, the record names only entries we
// wrote, and merging the result again changes nothing (no second write).
func FuzzMerge(f *testing.F) {
	f.Add("192.0.2.0/24, 2001:db8:a::/64", "2001:db8:a::/64", "2001:db8:b::/64,2001:db8:a::/64")
	f.Add("2001:db8:b::1-2001:db8:b::ff,2001:db8:b::1 - 2001:db8:b::ff", "2001:db8:b::1-2001:db8:b::ff", "2001:db8:b::1-2001:db8:b::ff")
	f.Add("10.0.0.1-,::1,,garbage, ::1/128", "garbage,::1", "::1")
	f.Fuzz(func(t *testing.T, liveV, recordV, desiredV string) {
		live, record, desired := Split(liveV), Split(recordV), Split(desiredV)
		entries, newRecord := Merge(live, record, desired)
		owned := claimed(record)
		at := 0
		for _, e := range live {
			if owned[Canonical(e)] {
				continue
			}
			i := slices.Index(entries[at:], e)
			if i < 0 {
				t.Fatalf("user entry %q lost or out of order: %q from %q", e, entries, live)
			}
			at += i + 1
		}
		for _, d := range desired {
			if !slices.ContainsFunc(entries, func(e string) bool { return Canonical(e) == Canonical(d) }) {
				t.Errorf("desired %q missing from %q", d, entries)
			}
		}
		for _, r := range newRecord {
			if !slices.ContainsFunc(desired, func(d string) bool { return Canonical(d) == r }) {
				t.Errorf("record %q names %q, which we did not want", newRecord, r)
			}
		}
		again, againRecord := Merge(entries, newRecord, desired)
		if !slices.Equal(again, entries) || !slices.Equal(againRecord, newRecord) {
			t.Errorf("merging again: %q %q, was %q %q", again, againRecord, entries, newRecord)
		}
		if c := Canonical(desiredV); Canonical(c) != c {
			t.Errorf("Canonical(%q) = %q, not a fixed point", desiredV, c)
		}
	})
}

// A tenant who owns a Service may write anything into its annotations,
// our records included. Whatever they write: rendering never fails for a
// well-formed follow, never removes an entry the records do not claim, and
// writing the rendering then rendering again changes nothing.
func FuzzServiceAnnotations(f *testing.F) {
	f.Add("192.0.2.7,2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "lb.example.org,2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "", "", "2001:db8:b::ffff:0:1", false)
	f.Add("", "", "x,,y", "", "external-dns.kubernetes.io/target", "kube-vip.io/loadbalancerIPs", "", true)
	f.Add("::1,::1", "::1,garbage", "2001:db8:b::ffff:0:1", "2001:db8:b::ffff:0:1", "lbipam.cilium.io/ips,,", "", "2001:db8:a::ffff:0:1,::1", false)
	f.Fuzz(func(t *testing.T, ips, managedIPs, targets, managedTargets, targetKeys, ipsKey, ingress string, kubevip bool) {
		ann := map[string]string{AnnotationIPs: ips, AnnotationKubeVIPIPs: ips, AnnotationManagedIPs: managedIPs,
			AnnotationTarget: targets, AnnotationTargetAlpha: targets, AnnotationManagedTarget: managedTargets,
			AnnotationManagedTargetKeys: targetKeys, AnnotationManagedIPsKey: ipsKey}
		for k, v := range ann {
			if v == "" {
				delete(ann, k)
			}
		}
		follow := ServiceFollow{Suffix: "::ffff:0:1"}
		if kubevip {
			follow.Provider = "kube-vip"
		}
		o := ServiceOptions{TargetKeys: DefaultTargetKeys, Managed: []netip.Prefix{cur, prefixOld}, L2Nudge: true}
		live := Live(ann, o.TargetKeys)
		got, err := Service(model, follow, []netip.Prefix{cur, prefixOld}, live, Split(ingress), o)
		if err != nil {
			t.Fatalf("rendering: %v", err)
		}
		claimedIPs := claimed(geometric(live, o.Managed).ManagedIPs)
		claimedTargets := claimed(geometric(live, o.Managed).ManagedTargets)
		for k, v := range live.IPs {
			for _, e := range v {
				if !claimedIPs[Canonical(e)] && !slices.Contains(got.IPs[k], e) {
					t.Errorf("%s: user entry %q removed: %q", k, e, got.IPs[k])
				}
			}
		}
		for k, v := range live.Targets {
			for _, e := range v {
				if !claimedTargets[Canonical(e)] && !slices.Contains(got.Targets[k], e) {
					t.Errorf("%s: user target %q removed: %q", k, e, got.Targets[k])
				}
			}
		}
		written := Applied(ann, map[string]any(got.Patch(live)))
		for k := range written {
			if strings.TrimSpace(written[k]) == "" && ann[k] != written[k] {
				t.Errorf("the patch leaves %s empty", k)
			}
		}
		again, err := Service(model, follow, []netip.Prefix{cur, prefixOld}, Live(written, o.TargetKeys), Split(ingress), o)
		if err != nil || !again.Equal(got) {
			t.Errorf("rendering what was written changes it:\n%+v\n%+v (%v)", got, again, err)
		}
	})
}

// claimed is the set of entries' canonical forms.
func claimed(entries []string) map[string]bool {
	out := map[string]bool{}
	for _, e := range entries {
		out[Canonical(e)] = true
	}
	return out
}
