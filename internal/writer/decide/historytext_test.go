package decide

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/model"
)

// Issue 42, a stolen writer token (red team r7b, F2): history entries are
// the prefixes they name, not their text. The token renamed the current
// prefix (2001:db8:a:0::/64) and gave it an active entry of its own, in
// that text, acquired later than PrefixAcquired says; matched by text, the
// writer read the current prefix as replaced by itself: a new entry
// acquired at PrefixAcquired's time, and the token's drained from now -
// which renumber-writer-status refuses (a drain begins when the new
// current entry is acquired), at every pass. Keyed by the parsed, masked
// prefix, the entry is the current prefix's, kept as it is, and written
// back in netip's text; another entry in another text is its prefix's too.
func TestAHistoryEntryIsThePrefixItNamesInAnyText(t *testing.T) {
	later := t0.Add(time.Hour)
	forged := Status{CurrentPrefix: "2001:db8:a:0::/64", History: []HistoryEntry{
		{Prefix: "2001:db8:a:0::/64", State: model.StateActive, AcquiredAt: later},
		{Prefix: "2001:DB8:9::/64", State: model.StateExpired, DeprecatedAt: t0, ExpiresAt: t0.Add(3 * time.Hour)},
	}}
	d := For(parse(eth0()), forged, reports(t, onA, onA, onA), t0.Add(2*time.Hour))
	want := []HistoryEntry{
		{Prefix: "2001:db8:a::/64", State: model.StateActive, AcquiredAt: later},
		{Prefix: "2001:db8:9::/64", State: model.StateExpired, DeprecatedAt: t0, ExpiresAt: t0.Add(3 * time.Hour)},
	}
	if diff := cmp.Diff(want, d.History); diff != "" {
		t.Errorf("the current prefix renamed, its entry acquired later: history (-want +got):\n%s", diff)
	}
}
