package e2e

// The writer's records (dynamic-prefix.io/managed-*) on objects that follow
// a DynamicPrefix, against a stolen writer token (sixth red team, r6b,
// findings 1 and 4; moved here from their policy_optin_test.go, whose
// other test is finding 6's).

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestAStolenWriterTokenTakesNoUsersEntryOffAFollowingObject (r6b): on an
// object that follows a DynamicPrefix the value policy lets every removal
// pass, and the writer's record names only its own entries - so the user's
// entries the token takes out are gone for good (the honest writer keeps
// what is there beside its record, and cannot know what was). The docs
// promise the user's entries only on objects that follow nothing; the
// brief's adversary model says "take the user's entries off an object".
// Each removal of the user's entry is admitted today; the writer's own
// entry (its record names it) may go.
func TestAStolenWriterTokenTakesNoUsersEntryOffAFollowingObject(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9", holdings.AnnotationManagedIPs: "2001:db8:1::9",
		holdings.AnnotationTarget: "a.example.org,2001:db8:1::9", holdings.AnnotationManagedTarget: "2001:db8:1::9"})
	for what, ann := range map[string]map[string]any{
		"the user's IPv4 address": {holdings.AnnotationIPs: "2001:db8:1::9"},
		"the user's DNS target":   {holdings.AnnotationTarget: "2001:db8:1::9"},
	} {
		if err := s.annotate("default", "web", ann); !denied(err) {
			t.Errorf("%s taken off a Service that follows home: %s", what, errString(err))
		}
		_ = s.annotate("default", "web", map[string]any{holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9", holdings.AnnotationTarget: "a.example.org,2001:db8:1::9"})
	}
	lan := map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lan", "annotations": map[string]any{"dynamic-prefix.io/name": "home",
			"dynamic-prefix.io/managed-blocks": "cidr=2001:db8:1::/64"}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}, map[string]any{"cidr": "2001:db8:1::/64"}}}}
	apply(t, s.w, poolGVR, lan)
	if err := s.patch(poolGVR, "", "lan", `{"spec":{"blocks":[{"cidr":"2001:db8:1::/64"}]}}`); !denied(err) {
		t.Errorf("the user's IPv4 block taken out of a pool that follows home: %s", errString(err))
	}
	// Once out, not even the honest writer could put it back (192.0.2.0/24
	// is in no prefix home names): only the user can.
	if _, err := s.w.API.Dynamic.Resource(poolGVR).Patch(s.ctx, "lan", types.MergePatchType,
		[]byte(`{"spec":{"blocks":[{"cidr":"192.0.2.0/24"},{"cidr":"2001:db8:1::/64"}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.patch(poolGVR, "", "lan", `{"spec":{"blocks":[{"cidr":"192.0.2.0/24"}]}}`); err != nil {
		t.Errorf("the writer's own block (its record names it) out of a pool that follows home: %v", err)
	}
}

// TestAnAddressTheWriterAddsIsOneItsRecordNames (r6b): renumber-writer-status
// admits a prefix made current whenever the spec's prefixFilter accepts it
// (allowedPrefixes unset, the default: any global /64), and
// renumber-writer-values then admits addresses in it. The honest writer
// puts the status back at its next pass (decide: a prefix no node reports
// is replaced where one leads), but an address the token added in between
// without naming it in the Service's record (dynamic-prefix.io/managed-ips)
// or the pool's (managed-blocks) is the user's to the writer
// (render.addresses, holdings.Merge keep every entry the record does not
// name): 2001:db8:bad::1 stays on the Service, and 2001:db8:bad::/64 in
// the pool, after the status no longer names it, for good. The writer
// records every entry it adds; a write adding one its record does not name
// is not the writer's. Refused by nothing today.
func TestAnAddressTheWriterAddsIsOneItsRecordNames(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9", holdings.AnnotationManagedIPs: "2001:db8:1::9"})
	apply(t, s.w, poolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lan", "annotations": map[string]any{"dynamic-prefix.io/name": "home",
			"dynamic-prefix.io/managed-blocks": "cidr=2001:db8:1::/64"}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "2001:db8:1::/64"}}}})
	// The token names 2001:db8:bad::/64 current (admitted: the filter
	// accepts any global /64).
	forged := `{"status":{"currentPrefix":"2001:db8:bad::/64","history":[` +
		`{"prefix":"2001:db8:bad::/64","state":"active","acquiredAt":"2026-11-29T08:00:00Z"},` +
		`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2026-11-29T08:00:00Z"},` +
		`{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
	if err := s.patch(api.GVR, "", "home", forged, "status"); err != nil {
		t.Fatalf("the token's status naming 2001:db8:bad::/64 current (admitted by design, docs/security.md): %v", err)
	}
	eventually(t, "the value policy reads the forged status", func() (bool, string) {
		err := s.annotate("default", "web", map[string]any{holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9,2001:db8:bad::1",
			holdings.AnnotationManagedIPs: "2001:db8:1::9,2001:db8:bad::1"})
		return err == nil, errString(err)
	})
	// The honest shape passed (recorded); now the same address unrecorded.
	if err := s.annotate("default", "web", map[string]any{holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9",
		holdings.AnnotationManagedIPs: "2001:db8:1::9"}); err != nil {
		t.Fatal(err)
	}
	if err := s.annotate("default", "web", map[string]any{holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9,2001:db8:bad::1"}); !denied(err) {
		t.Errorf("2001:db8:bad::1 added to a following Service without its record naming it (the writer would keep it as the user's, for good): %s", errString(err))
	}
	if err := s.patch(poolGVR, "", "lan", `{"spec":{"blocks":[{"cidr":"2001:db8:1::/64"},{"cidr":"2001:db8:bad::/64"}]}}`); !denied(err) {
		t.Errorf("2001:db8:bad::/64 added to a following pool without its record naming it: %s", errString(err))
	}
}

// TestTheAddressKeyRecordNamesOnlyAnAddressKey (r6b): on a Service that
// follows a DynamicPrefix renumber-writer-services lets the writer set
// dynamic-prefix.io/managed-ips-key to anything. Forged to a key the
// addresses are not under, it makes the honest writer disown them
// (render.TestAForgedAddressKeyRecordDisownsNoAddress): the old prefix's
// address stays on the Service, as the user's, for good. The writer only
// ever writes kube-vip.io/loadbalancerIPs there, and only with a record of
// addresses it wrote under that key.
func TestTheAddressKeyRecordNamesOnlyAnAddressKey(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9", holdings.AnnotationManagedIPs: "2001:db8:1::9"})
	for _, key := range []string{"example.org/bogus", holdings.AnnotationKubeVIPIPs} {
		if err := s.annotate("default", "web", map[string]any{holdings.AnnotationManagedIPsKey: key}); !denied(err) {
			t.Errorf("managed-ips-key %q on a Service whose addresses are under %s: %s", key, holdings.AnnotationIPs, errString(err))
		}
		_ = s.annotate("default", "web", map[string]any{holdings.AnnotationManagedIPsKey: nil})
	}
}

// recordedAs is ann, a write to a Service that follows a DynamicPrefix,
// with the records naming every address and DNS target it writes: the
// writer records what it adds (renumber-writer-services refuses an
// address or target added unrecorded there), so a test's honest write
// does too, and one the value policy is to refuse is refused for its
// value alone.
func recordedAs(ann map[string]any) map[string]any {
	out := map[string]any{}
	var ips, targets []string
	for k, v := range ann {
		out[k] = v
		s, _ := v.(string)
		switch {
		case k == holdings.AnnotationIPs || k == holdings.AnnotationKubeVIPIPs:
			ips = append(ips, s)
		case strings.HasSuffix(k, "/target"):
			targets = append(targets, s)
		}
	}
	for r, l := range map[string][]string{holdings.AnnotationManagedIPs: ips, holdings.AnnotationManagedTarget: targets} {
		if len(l) > 0 {
			out[r] = strings.Join(slices.Compact(slices.Sorted(slices.Values(strings.Split(strings.Join(l, ","), ",")))), ",")
		}
	}
	return out
}

// TestTheWritersServiceWriteIsAdmittedWhateverTheServiceHolds: the record
// checks of renumber-writer-services read what the Service holds, which the
// stolen token wrote too (its writes may be refused, leaving nothing). After
// each of its seeded writes to a Service that follows home (the model test's
// writes: lists from everywhere, padded, stripped, records taken out), the
// writer's own pass on what is left (render.Service, the Service's patch,
// as the controller makes it; home pooling 2001:db8:1::/64 and, on every
// other pass, 2001:db8:2::/64) is admitted: no token write stalls the
// writer on a Service.
func TestTheWritersServiceWriteIsAdmittedWhateverTheServiceHolds(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		holdings.AnnotationIPs: "192.0.2.7", holdings.AnnotationTarget: "lb.example.org"})
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	writerAfterTheToken(t, s, obj{serviceGVR, "default", "web", true}, 1, func(step int, u *unstructured.Unstructured) map[string]any {
		ann := u.GetAnnotations()
		if _, big := holdings.TooManyEntries(ann); big {
			return nil // the writer leaves such a Service alone (render.MaxEntries)
		}
		live := holdings.Live(ann, holdings.DefaultTargetKeys)
		got, err := render.Service(m, holdings.ServiceFollowOf(ann), homeManaged[:1+step%2], live, render.Served{},
			render.ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Managed: homeManaged})
		if err != nil {
			t.Fatalf("step %d: rendering: %v", step, err)
		}
		if got.Equal(live) {
			return nil
		}
		return map[string]any{"metadata": map[string]any{"annotations": got.Patch(live)}}
	})
}

// TestTheWritersPoolWriteIsAdmittedWhateverThePoolHolds: the same for a
// pool's record (renumber-writer-pools), on a CIDR group that follows home:
// after each of the token's seeded writes, the writer's own write on what is
// left (holdings.Held.Claim of the pooled prefixes, as apply writes it: the
// entries and the record's value) is admitted.
func TestTheWritersPoolWriteIsAdmittedWhateverThePoolHolds(t *testing.T) {
	s := stealWriterToken(t, nil)
	apply(t, s.w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "grp", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	writerAfterTheToken(t, s, obj{groupGVR, "", "grp", true}, 2, func(step int, u *unstructured.Unstructured) map[string]any {
		entries, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "externalCIDRs")
		if len(entries) > 256 {
			return nil // over renumber-writer-sizes's bound: the writer's write would be refused too, and reported
		}
		value, present := u.GetAnnotations()[poolRecord]
		h := holdings.Held{Form: holdings.CIDRs, Entries: entries, Record: holdings.ReadRecord(value, present, holdings.Listed), RecordValue: value}
		var pooled []string
		for _, p := range homeManaged[:1+step%2] {
			pooled = append(pooled, p.String())
		}
		w := h.Claim(pooled, false, homeManaged)
		if w.Holds {
			return nil
		}
		var rec any
		if w.Record != nil {
			rec = w.Value
		}
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{poolRecord: rec}},
			"spec": map[string]any{"externalCIDRs": w.Entries}}
	})
}

// homeManaged are the prefixes home's status names (stealWriterToken):
// current, draining, expired.
var homeManaged = []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64"), netip.MustParsePrefix("2001:db8:3::/64")}

// writerAfterTheToken plays 100 of the stolen token's seeded writes to o
// (seed: which), each followed by the writer's pass on what is left (pass:
// the merge patch it makes, nil for none), which must be admitted.
func writerAfterTheToken(t *testing.T, s stolen, o obj, seed uint64, pass func(step int, u *unstructured.Unstructured) map[string]any) {
	t.Helper()
	g := gen{rand.New(rand.NewPCG(29, seed))}
	var writes, admitted int
	for step := range 100 {
		body, _ := g.write(o, s.read(t, o.gvr, o.ns, o.name))
		if s.patch(o.gvr, o.ns, o.name, body) == nil {
			admitted++
		}
		patch := pass(step, s.read(t, o.gvr, o.ns, o.name))
		if patch == nil {
			continue
		}
		writes++
		if err := s.patch(o.gvr, o.ns, o.name, jsonOf(t, patch)); err != nil {
			t.Errorf("step %d: the writer's write refused: %v\n(after the token's %s)\n(the writer's %s)", step, err, trim(body), jsonOf(t, patch))
		}
	}
	t.Logf("100 token writes, %d admitted; %d writes of the writer's", admitted, writes)
}
