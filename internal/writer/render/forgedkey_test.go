package render

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// TestAForgedAddressKeyRecordDisownsNoAddress (sixth red team, r6b):
// dynamic-prefix.io/managed-ips-key is one of the record annotations
// renumber-writer-services lets the writer change freely on a Service that
// follows a DynamicPrefix, and no policy reads its value. It says under
// which address key the managed addresses were written; addresses() owns
// the record's entries only under that key. A stolen token that sets it to
// a key that is no address key (or kube-vip's, on a Cilium Service) once
// makes the honest writer's next pass disown its own addresses: they stay
// beside the new ones as the user's, with no record naming them - the
// expired prefix's address on the Service for good, after the token is
// revoked (the record key is then dropped, as the writer writes none for
// lbipam.cilium.io/ips).
func TestAForgedAddressKeyRecordDisownsNoAddress(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	const old = "2001:db8:a::ffff:0:1" // ours, in prefixOld, which has expired
	for _, key := range []string{"example.org/bogus", holdings.AnnotationKubeVIPIPs} {
		live := holdings.Live(map[string]string{
			holdings.AnnotationIPs: "192.0.2.7," + old, holdings.AnnotationManagedIPs: old,
			holdings.AnnotationManagedIPsKey: key,
		}, holdings.DefaultTargetKeys)
		got, err := Service(specS, f, []netip.Prefix{cur}, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(got.IPs[holdings.AnnotationIPs], old) {
			t.Errorf("managed-ips-key forged as %q: %s of the expired prefix stays on the Service (%q, record %q)", key, old, got.IPs[holdings.AnnotationIPs], got.ManagedIPs)
		}
		again, _ := Service(specS, f, []netip.Prefix{cur}, got, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
		if slices.Contains(again.IPs[holdings.AnnotationIPs], old) && !slices.Contains(again.ManagedIPs, old) {
			t.Errorf("managed-ips-key forged as %q: a pass later %s is still there, and no record names it", key, old)
		}
	}
}

// TestAForgedEmptyRecordDisownsNoAddress (r6b): the same with the record
// itself - dynamic-prefix.io/managed-ips, which renumber-writer-services
// and renumber-writer-values let the writer set to anything on a following
// Service (the pools' managed-blocks/-cidrs/-addresses likewise). Present
// but naming none of ours, it disowns them: geometric (the existing
// operator's rule) applies only where no record is present at all.
func TestAForgedEmptyRecordDisownsNoAddress(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	const old = "2001:db8:a::ffff:0:1"
	for _, record := range []string{"", "192.0.2.7"} {
		live := holdings.Live(map[string]string{
			holdings.AnnotationIPs: "192.0.2.7," + old, holdings.AnnotationManagedIPs: record,
		}, holdings.DefaultTargetKeys)
		got, err := Service(specS, f, []netip.Prefix{cur}, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Managed: []netip.Prefix{prefixOld, cur}})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(got.IPs[holdings.AnnotationIPs], old) {
			t.Errorf("managed-ips forged as %q: %s of the expired prefix stays on the Service (%q, record %q)", record, old, got.IPs[holdings.AnnotationIPs], got.ManagedIPs)
		}
	}
}
