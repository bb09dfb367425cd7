package render

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// TestARespelledEntryIsTakenOutOnlyAsTheRecordSpellsIt (red team r8, F1):
// renumber-writer-services compares a Service's entries and records as
// strings, so a stolen writer token may add an entry in another spelling
// than the user's - 2001:DB8:A::5 beside 2001:db8:a::5, no key held it
// before - and record it. The writer's pass then takes out the token's
// entry as the record spells it, and keeps the user's in the user's
// spelling: it used to own both by value, and the API server refused its
// removal of the user's (unrecorded), and every write after it.
func TestARespelledEntryIsTakenOutOnlyAsTheRecordSpellsIt(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	const ours = "2001:db8:b::ffff:0:1"
	tests := []struct {
		name      string
		ann       map[string]string
		key, user string // the user's entry, spelled as the user wrote it
		gone      string // the token's, which the writer takes out
	}{
		{"the token's uppercase copy beside the user's", map[string]string{
			holdings.AnnotationIPs:        "2001:db8:a::5," + ours + ",2001:DB8:A::5",
			holdings.AnnotationManagedIPs: ours + ",2001:DB8:A::5"}, holdings.AnnotationIPs, "2001:db8:a::5", "2001:DB8:A::5"},
		{"the token's copy with a zero group, under the other address key", map[string]string{
			holdings.AnnotationIPs: "2001:db8:a::5," + ours, holdings.AnnotationKubeVIPIPs: "2001:db8:a:0::5",
			holdings.AnnotationManagedIPs: ours + ",2001:db8:a:0::5"}, holdings.AnnotationIPs, "2001:db8:a::5", "2001:db8:a:0::5"},
		{"the token's canonical copy beside the user's uppercase", map[string]string{
			holdings.AnnotationIPs:        "2001:DB8:A::5," + ours + ",2001:db8:a::5",
			holdings.AnnotationManagedIPs: ours + ",2001:db8:a::5"}, holdings.AnnotationIPs, "2001:DB8:A::5", "2001:db8:a::5"},
		{"a DNS target", map[string]string{
			holdings.AnnotationIPs: ours, holdings.AnnotationManagedIPs: ours,
			holdings.AnnotationTarget:        "2001:db8:a::5," + ours + ",2001:DB8:A::5",
			holdings.AnnotationManagedTarget: ours + ",2001:DB8:A::5"}, holdings.AnnotationTarget, "2001:db8:a::5", "2001:DB8:A::5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := holdings.Live(tt.ann, holdings.DefaultTargetKeys)
			for _, pooled := range [][]netip.Prefix{{cur, prefixOld}, {cur}} {
				got, err := Service(specS, f, pooled, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Managed: []netip.Prefix{cur, prefixOld}})
				if err != nil {
					t.Fatal(err)
				}
				written := holdings.Applied(tt.ann, got.Patch(live))
				if v := holdings.Split(written[tt.key]); !slices.Contains(v, tt.user) {
					t.Errorf("pooled %v: the user's %s taken out of %s: %q", pooled, tt.user, tt.key, v)
				}
				for _, k := range slices.Concat(holdings.AddressKeys, holdings.DefaultTargetKeys) {
					if v := holdings.Split(written[k]); slices.Contains(v, tt.gone) {
						t.Errorf("pooled %v: the token's %s, which the record named, left under %s: %q", pooled, tt.gone, k, v)
					}
				}
			}
		})
	}
}
