package e2e

// A Gateway's record (dynamic-prefix.io/managed-ips) under a stolen writer
// token: renumber-writer-gateways holds it as renumber-writer-services holds
// a Service's (red team r9a F4), counting addresses across the Gateway's
// three places - spec.addresses, the infrastructure annotation
// lbipam.cilium.io/ips and the DNS targets.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// gatewayAt is a Gateway in default following home, with the annotations
// ann (beside dynamic-prefix.io/name), spec.addresses addresses (IPAddress
// values, or "Hostname "+name) and the infrastructure annotation infra.
func gatewayAt(name string, ann map[string]any, addresses []string, infra string) map[string]any {
	annotations := map[string]any{"dynamic-prefix.io/name": "home"}
	for k, v := range ann {
		annotations[k] = v
	}
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": name, "namespace": "default", "annotations": annotations},
		"spec": map[string]any{"gatewayClassName": "cilium",
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
			"addresses": gatewayAddressList(addresses), "infrastructure": map[string]any{"annotations": map[string]any{holdings.AnnotationIPs: infra}}}}
}

// gatewayAddressList is spec.addresses of IPAddress values ("Hostname h": h).
func gatewayAddressList(addresses []string) []any {
	out := []any{}
	for _, a := range addresses {
		if h, ok := strings.CutPrefix(a, "Hostname "); ok {
			out = append(out, map[string]any{"type": "Hostname", "value": h})
			continue
		}
		out = append(out, map[string]any{"type": "IPAddress", "value": a})
	}
	return out
}

// gatewayWrite is a merge patch of a Gateway's annotations ann and, when
// not nil, its spec.addresses and infrastructure annotation.
func gatewayWrite(t *testing.T, ann map[string]any, addresses []string, infra any) string {
	t.Helper()
	spec := map[string]any{}
	if addresses != nil {
		spec["addresses"] = gatewayAddressList(addresses)
	}
	if infra != nil {
		spec["infrastructure"] = map[string]any{"annotations": map[string]any{holdings.AnnotationIPs: infra}}
	}
	patch := map[string]any{"spec": spec}
	if ann != nil { // "annotations": null would take every annotation out
		patch["metadata"] = map[string]any{"annotations": ann}
	}
	return jsonOf(t, patch)
}

// TestAGatewaysRecordChangesOnlyWithItsAddresses: on a Gateway that follows
// home, holding the user's hostname, 192.0.2.9 (in spec.addresses and the
// infrastructure annotation), DNS targets a.example.org and, under the
// alpha key alone, 192.0.2.10, beside the writer's recorded 2001:db8:1::9
// in all three places, each of the token's writes that would make the
// record lie is refused: recording an address already there (the user's:
// the honest writer would take it out), adding one unrecorded (the user's
// to the writer, for good), a recorded target under a key the writer does
// not write (left behind when the record drops it), taking out an entry
// the record does not name, dropping one from the record that stays, and
// removing the record (the writer's next write would own the user's IPv6
// addresses equal to its own). The writer's own moves are admitted: its
// address taken out everywhere with the record emptied, a new one added
// everywhere and recorded, and its first write on a Gateway it never wrote.
func TestAGatewaysRecordChangesOnlyWithItsAddresses(t *testing.T) {
	s := stealWriterToken(t, nil)
	if err := s.w.API.InstallGatewayAPI(s.ctx); err != nil {
		t.Fatal(err)
	}
	const ours = "2001:db8:1::9"
	ann := map[string]any{holdings.AnnotationManagedIPs: ours,
		holdings.AnnotationTarget: "a.example.org," + ours, holdings.AnnotationTargetAlpha: "192.0.2.10," + ours}
	addresses := []string{"Hostname web.example.org", "192.0.2.9", ours}
	infra := "192.0.2.9," + ours
	n := 0
	fresh := func() string {
		n++
		name := fmt.Sprintf("web-%d", n)
		apply(t, s.w, gatewayGVR, gatewayAt(name, ann, addresses, infra))
		return name
	}
	refused := map[string]string{
		"the user's 192.0.2.9 recorded":                      gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: ours + ",192.0.2.9"}, nil, nil),
		"the user's DNS target 192.0.2.10 recorded":          gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: ours + ",192.0.2.10"}, nil, nil),
		"an address added unrecorded":                        gatewayWrite(t, nil, append(slices.Clone(addresses), "2001:db8:1::5"), nil),
		"an infrastructure address added unrecorded":         gatewayWrite(t, nil, nil, infra+",2001:db8:1::5"),
		"a DNS target added unrecorded":                      gatewayWrite(t, map[string]any{holdings.AnnotationTarget: "a.example.org," + ours + ",2001:db8:1::5"}, nil, nil),
		"the recorded address under a key the writer skips":  gatewayWrite(t, map[string]any{"example.org/target": ours}, nil, nil),
		"the user's 192.0.2.9 out of the infrastructure":     gatewayWrite(t, nil, nil, ours),
		"the user's 192.0.2.9 out of spec.addresses":         gatewayWrite(t, nil, []string{"Hostname web.example.org", ours}, nil),
		"the user's hostname out of spec.addresses":          gatewayWrite(t, nil, []string{"192.0.2.9", ours}, nil),
		"the user's DNS target out":                          gatewayWrite(t, map[string]any{holdings.AnnotationTarget: ours}, nil, nil),
		"the writer's address dropped from the record, kept": gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: ""}, nil, nil),
		"the record removed, with the writer's address out": gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: nil,
			holdings.AnnotationTarget: "a.example.org", holdings.AnnotationTargetAlpha: "192.0.2.10"}, []string{"Hostname web.example.org", "192.0.2.9"}, "192.0.2.9"),
	}
	for _, what := range slices.Sorted(maps.Keys(refused)) {
		if err := s.patch(gatewayGVR, "default", fresh(), refused[what]); !denied(err) {
			t.Errorf("%s on a Gateway that follows home: got %s, want refused", what, errString(err))
		}
	}
	admitted := map[string]string{
		"the writer's address out everywhere, the record emptied": gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: "",
			holdings.AnnotationTarget: "a.example.org", holdings.AnnotationTargetAlpha: "192.0.2.10"}, []string{"Hostname web.example.org", "192.0.2.9"}, "192.0.2.9"),
		"a new address everywhere, recorded": gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: "2001:db8:2::9," + ours,
			holdings.AnnotationTarget: "a.example.org,2001:db8:2::9", holdings.AnnotationTargetAlpha: "192.0.2.10,2001:db8:2::9"},
			append(slices.Clone(addresses), "2001:db8:2::9"), infra+",2001:db8:2::9"),
	}
	for _, what := range slices.Sorted(maps.Keys(admitted)) {
		if err := s.patch(gatewayGVR, "default", fresh(), admitted[what]); err != nil {
			t.Errorf("%s on a Gateway that follows home: refused: %v", what, err)
		}
	}
	// A Gateway the writer never wrote: the user's 192.0.2.9, and the
	// address the writer gives already in spec.addresses (the user's
	// manifest names it). The first write records both of the writer's
	// (holdings.Common) and mirrors the user's into the infrastructure.
	apply(t, s.w, gatewayGVR, gatewayAt("new", nil, []string{"192.0.2.9", ours}, ""))
	first := gatewayWrite(t, map[string]any{holdings.AnnotationManagedIPs: ours + ",2001:db8:2::9", holdings.AnnotationTarget: ours, holdings.AnnotationTargetAlpha: ours},
		[]string{"192.0.2.9", ours, "2001:db8:2::9"}, "192.0.2.9,"+ours+",2001:db8:2::9")
	if err := s.patch(gatewayGVR, "default", "new", first); err != nil {
		t.Errorf("the writer's first write on a Gateway it never wrote: refused: %v", err)
	}
}

// TestTheGatewayPoliciesStayInsideTheirCostAtTheBounds: on a Gateway at
// every bound renumber-writer-sizes sets (256 annotations, 16 DNS target
// keys of 64 entries, a record of 64, the infrastructure annotation's 64,
// spec.addresses' 16), with every entry of the writer's replaced (the
// dearest evaluation): the writer's honest write is admitted by
// renumber-writer-gateways, which fails closed, and by a copy of
// renumber-writer-values that fails closed (so both evaluated to true
// within their cost); and one address outside the prefixes, last in the
// place the value policy reads it in, is refused by the shipped value
// policy alone, which would admit it on an error.
func TestTheGatewayPoliciesStayInsideTheirCostAtTheBounds(t *testing.T) {
	s := stealWriterToken(t, nil)
	if err := s.w.API.InstallGatewayAPI(s.ctx); err != nil {
		t.Fatal(err)
	}
	historyAtItsBound(t, s.w)
	entries := func(p, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("2001:db8:%x::%x", p, i+1)
		}
		return out
	}
	// The writer's places: spec.addresses, the infrastructure annotation
	// and the two DNS target keys it writes; the user's 14 other target
	// keys hold 64 entries each, unchanged.
	const places = 4
	ourKeys := []string{holdings.AnnotationTarget, holdings.AnnotationTargetAlpha}
	// at is the writer's entries on prefix p in each place, and its record;
	// bad (a place, -1 none): that place's last entry is outside, and the
	// other lists of 64 hold their last but one twice, so the record stays
	// at 64 (spec.addresses, whose IPAddress values the CRD keeps unique,
	// holds 16 of the record's first 63).
	at := func(p, bad int) (record []string, in [places][]string) {
		all := entries(p, 64)
		record = slices.Clone(all)
		if bad >= 0 {
			record[63] = "2001:db8:bad::1"
		}
		for i := range places {
			l := slices.Clone(all)
			if i == 0 {
				l = slices.Clone(all[:16])
			}
			switch {
			case i == bad:
				l[len(l)-1] = "2001:db8:bad::1"
			case bad >= 0 && i > 0:
				l[len(l)-1] = l[len(l)-2]
			}
			in[i] = l
		}
		return record, in
	}
	annotations := func(record []string, in [places][]string) map[string]any {
		out := map[string]any{holdings.AnnotationManagedIPs: strings.Join(record, ",")}
		for i, k := range ourKeys {
			out[k] = strings.Join(in[2+i], ",")
		}
		return out
	}
	before := annotations(at(16, -1))
	for i := range 14 {
		before[fmt.Sprintf("k%d.example.org/target", i)] = strings.Join(entries(15, 64), ",")
	}
	for i := 0; len(before) < 255; i++ { // and dynamic-prefix.io/name
		before[fmt.Sprintf("example.org/user-%d", i)] = "x"
	}
	_, in := at(16, -1)
	apply(t, s.w, gatewayGVR, gatewayAt("big", before, in[0], strings.Join(in[1], ",")))
	write := func(bad int) string {
		record, in := at(1, bad)
		return gatewayWrite(t, annotations(record, in), in[0], strings.Join(in[1], ","))
	}
	for bad, where := range []string{"spec.addresses", "the infrastructure annotation", ourKeys[0], ourKeys[1]} {
		if err := s.patch(gatewayGVR, "default", "big", write(bad)); !denied(err) {
			t.Errorf("a Gateway at the bounds, one address outside last in %s: got %s, want refused", where, errString(err))
		}
	}
	measure(t, s.w)
	apply(t, s.w, groupGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup", "metadata": map[string]any{"name": measureProbe}, "spec": map[string]any{"externalCIDRs": []any{}}})
	eventually(t, "the measuring copy enforced", func() (bool, string) {
		err := s.patch(groupGVR, "", measureProbe, `{"spec":{"externalCIDRs":["198.51.100.0/24"]}}`)
		return err != nil && strings.Contains(err.Error(), measureProbe), errString(err)
	})
	if err := s.patch(gatewayGVR, "default", "big", write(-1)); err != nil {
		t.Errorf("the writer's write to a Gateway at every bound: refused (a policy's evaluation did not end true): %v", err)
	}
}
