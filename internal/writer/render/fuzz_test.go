package render

import (
	"github.com/renumber/renumber/internal/writer/holdings"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// A tenant who owns a Service may write anything into its annotations,
// our records included. Whatever they write: rendering never fails for a
// well-formed follow, never removes an entry the records do not claim in
// its spelling (the admission policies compare strings: red team r8, F1), never
// leaves an annotation empty but a record it empties (it keeps a record
// once written), and writing the rendering then rendering again changes
// nothing. Whatever a load balancer publishes for another object
// (elsewhere), no target of ours is such an address.
func FuzzServiceAnnotations(f *testing.F) {
	f.Add("192.0.2.7,2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "lb.example.org,2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "", "", "2001:db8:b::ffff:0:1", "", false)
	f.Add("", "", "x,,y", "", "external-dns.kubernetes.io/target", "kube-vip.io/loadbalancerIPs", "", "", true)
	f.Add("::1,::1", "::1,garbage", "2001:db8:b::ffff:0:1", "2001:db8:b::ffff:0:1", "lbipam.cilium.io/ips,,", "", "2001:db8:a::ffff:0:1,::1", "", false)
	f.Add("192.0.2.7,2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "2001:db8:a::ffff:0:1", "", "", "192.0.2.7", "2001:db8:b::ffff:0:1", false)
	f.Add("2001:db8:b::ffff:0:1", "2001:db8:b::ffff:0:1", "2001:db8:b::ffff:0:1", "2001:db8:b::ffff:0:1", "", "", "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1", false)
	f.Fuzz(func(t *testing.T, ips, managedIPs, targets, managedTargets, targetKeys, ipsKey, ingress, elsewhere string, kubevip bool) {
		ann := map[string]string{holdings.AnnotationIPs: ips, holdings.AnnotationKubeVIPIPs: ips, holdings.AnnotationManagedIPs: managedIPs,
			holdings.AnnotationTarget: targets, holdings.AnnotationTargetAlpha: targets, holdings.AnnotationManagedTarget: managedTargets,
			holdings.AnnotationManagedTargetKeys: targetKeys, holdings.AnnotationManagedIPsKey: ipsKey}
		for k, v := range ann {
			if v == "" {
				delete(ann, k)
			}
		}
		follow := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
		if kubevip {
			follow.Provider = "kube-vip"
		}
		o := ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Managed: []netip.Prefix{cur, prefixOld}, L2Nudge: true}
		live := holdings.Live(ann, o.TargetKeys)
		others := holdings.Split(elsewhere)
		served := Served{Ingress: holdings.Split(ingress), Others: func(a string) []string {
			if slices.Contains(others, a) {
				return []string{"tenant/squat"}
			}
			return nil
		}}
		got, err := Service(specS, follow, []netip.Prefix{cur, prefixOld}, live, served, o)
		if err != nil {
			t.Fatalf("rendering: %v", err)
		}
		for _, a := range got.ManagedTargets {
			if served.Elsewhere(a) != "" {
				t.Errorf("the target %s is published for tenant/squat, not for the Service (%q)", a, served.Ingress)
			}
		}
		claimedIPs := claimed(geometric(live, o.Managed).ManagedIPs)
		claimedTargets := claimed(geometric(live, o.Managed).ManagedTargets)
		for k, v := range live.IPs {
			for _, e := range v {
				if !claimedIPs[e] && !slices.Contains(got.IPs[k], e) {
					t.Errorf("%s: user entry %q removed: %q", k, e, got.IPs[k])
				}
			}
		}
		for k, v := range live.Targets {
			for _, e := range v {
				if !claimedTargets[e] && !slices.Contains(got.Targets[k], e) {
					t.Errorf("%s: user target %q removed: %q", k, e, got.Targets[k])
				}
			}
		}
		written := holdings.Applied(ann, map[string]any(got.Patch(live)))
		for k := range written {
			_, had := ann[k]
			kept := had && written[k] == "" && (k == holdings.AnnotationManagedIPs || k == holdings.AnnotationManagedTarget)
			if strings.TrimSpace(written[k]) == "" && ann[k] != written[k] && !kept {
				t.Errorf("the patch leaves %s empty", k)
			}
		}
		again, err := Service(specS, follow, []netip.Prefix{cur, prefixOld}, holdings.Live(written, o.TargetKeys), served, o)
		if err != nil || !again.Equal(got) {
			t.Errorf("rendering what was written changes it:\n%+v\n%+v (%v)", got, again, err)
		}
	})
}

// claimed is the set of entries as they are spelled.
func claimed(entries []string) map[string]bool {
	out := map[string]bool{}
	for _, e := range entries {
		out[e] = true
	}
	return out
}
