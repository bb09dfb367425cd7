// What a Service carries of ours, and the user's entries beside them, under
// its address and target keys (Annotations): read from its annotations
// (Live), compared (Equal) and written back as a merge patch (Patch).

package holdings

import (
	"cmp"
	"slices"
	"strings"
)

// Annotations are what a Service carries of ours; an empty list means the
// annotation is absent (an empty lbipam.cilium.io/ips would withdraw the
// Service's address, so none is ever written).
type Annotations struct {
	// IPs are the entries under each key of AddressKeys.
	IPs map[string][]string
	// ManagedIPs is the record of the addresses we own under IPsKey
	// (AnnotationIPs when "").
	ManagedIPs []string
	IPsKey     string
	// Targets are the entries under each target key: the keys asked for and
	// those the record names.
	Targets map[string][]string
	// ManagedTargets is the record of the target entries we own, under every
	// key of TargetKeys.
	ManagedTargets []string
	TargetKeys     []string
	// L2Nudged is the last nudge (AnnotationL2Nudged).
	L2Nudged []string
	// IPsRecorded, TargetsRecorded, KeysRecorded: the Service carries
	// AnnotationManagedIPs, AnnotationManagedTarget and
	// AnnotationManagedTargetKeys. Without the first two it was last written
	// before records existed (the existing operator's geometric rule then
	// says what it owns); without the third, by the existing operator or by
	// renumber before target keys could be chosen.
	IPsRecorded, TargetsRecorded, KeysRecorded bool
}

// Live reads a Service's annotations: the addresses, and the targets under
// every key of keys and of the record.
func Live(ann map[string]string, keys []string) Annotations {
	a := Annotations{
		IPs:            map[string][]string{},
		ManagedIPs:     Split(ann[AnnotationManagedIPs]),
		IPsKey:         ann[AnnotationManagedIPsKey],
		ManagedTargets: Split(ann[AnnotationManagedTarget]),
		TargetKeys:     targetKeysRecord(ann[AnnotationManagedTargetKeys]),
		L2Nudged:       Split(ann[AnnotationL2Nudged]),
		Targets:        map[string][]string{},
	}
	_, a.IPsRecorded = ann[AnnotationManagedIPs]
	_, a.TargetsRecorded = ann[AnnotationManagedTarget]
	_, a.KeysRecorded = ann[AnnotationManagedTargetKeys]
	if !a.KeysRecorded && len(a.ManagedTargets) > 0 {
		a.TargetKeys = keysHolding(ann, a.ManagedTargets)
	}
	for _, k := range AddressKeys {
		if v := Split(ann[k]); len(v) > 0 {
			a.IPs[k] = v
		}
	}
	for _, k := range slices.Concat(keys, a.TargetKeys) {
		if v := Split(ann[k]); len(v) > 0 {
			a.Targets[k] = v
		}
	}
	return a
}

// targetKeysRecord reads the keys record. Anyone who may edit the Service
// can write it: a key renumber could never have written there (not a valid
// target key, or repeated) is ignored, so a forged record cannot turn an
// address key or a record of ours into a target key.
func targetKeysRecord(v string) []string {
	var out []string
	for _, k := range Split(v) {
		if CheckTargetKeys(append(slices.Clone(out), k)) == nil {
			out = append(out, k)
		}
	}
	return out
}

// keysHolding are the target keys, of those the existing operator writes by
// default (both), that hold one of the managed targets: where a Service
// without our keys record has them. None: the alpha key, the one key written
// before keys could be chosen.
func keysHolding(ann map[string]string, managed []string) []string {
	var out []string
	for _, k := range DefaultTargetKeys {
		if slices.ContainsFunc(Split(ann[k]), func(e string) bool {
			return slices.ContainsFunc(managed, func(m string) bool { return Canonical(m) == Canonical(e) })
		}) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = []string{AnnotationTargetAlpha}
	}
	return out
}

// Owned reports whether the Service carries anything of ours (a record).
func (a Annotations) Owned() bool {
	return len(a.ManagedIPs) > 0 || a.IPsKey != "" || len(a.ManagedTargets) > 0 || len(a.TargetKeys) > 0 || len(a.L2Nudged) > 0
}

// Equal compares two renderings entry by entry, in canonical form and in any
// order (a load balancer and external-dns do not care about order), except
// that a's current address (the first of a.ManagedIPs) must lead ours in b:
// a prefix that becomes current again moves to the front.
func (a Annotations) Equal(b Annotations) bool {
	key := cmp.Or(a.IPsKey, AnnotationIPs)
	return Leads(b.IPs[key], a.ManagedIPs) && sameEntries(a.Targets, b.Targets) && sameEntries(a.IPs, b.IPs) &&
		SameSet(a.ManagedIPs, b.ManagedIPs) && a.IPsKey == b.IPsKey &&
		SameSet(a.ManagedTargets, b.ManagedTargets) && SameSet(a.TargetKeys, b.TargetKeys) &&
		SameSet(a.L2Nudged, b.L2Nudged)
}

// Applied is ann after the merge patch of annotations patch (a nil value
// removes a key): what the Service carries once the patch is made.
func Applied(ann map[string]string, patch map[string]any) map[string]string {
	out := make(map[string]string, len(ann)+len(patch))
	for k, v := range ann {
		out[k] = v
	}
	for k, v := range patch {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			delete(out, k)
		}
	}
	return out
}

// Patch is the annotations map of a merge patch making a Service carry a
// (null removes one), given what it carries now: every annotation of ours
// either rendering names, nothing else. A record a says is carried
// (IPsRecorded, TargetsRecorded) stays, empty where it names nothing.
func (a Annotations) Patch(live Annotations) map[string]any {
	val := func(v []string) any {
		if len(v) == 0 {
			return nil
		}
		return strings.Join(v, ",")
	}
	record := func(v []string, kept bool) any {
		if len(v) == 0 && kept {
			return "" // present and empty: it owns nothing (render.recorded)
		}
		return val(v)
	}
	out := map[string]any{
		AnnotationManagedIPs: record(a.ManagedIPs, a.IPsRecorded), AnnotationManagedIPsKey: nil,
		AnnotationManagedTarget: record(a.ManagedTargets, a.TargetsRecorded), AnnotationManagedTargetKeys: val(a.TargetKeys),
		AnnotationL2Nudged: val(a.L2Nudged),
	}
	if a.IPsKey != "" {
		out[AnnotationManagedIPsKey] = a.IPsKey
	}
	for _, m := range []map[string][]string{live.IPs, live.Targets} {
		for k := range m {
			out[k] = nil
		}
	}
	for _, m := range []map[string][]string{a.IPs, a.Targets} {
		for k, v := range m {
			out[k] = val(v)
		}
	}
	return out
}

// sameEntries compares entries under each key, as sets (a key without
// entries is absent).
func sameEntries(a, b map[string][]string) bool {
	for k, v := range a {
		if !SameSet(v, b[k]) {
			return false
		}
	}
	for k, v := range b {
		if !SameSet(v, a[k]) {
			return false
		}
	}
	return true
}
