package decide

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// TestAForgedSinceInYearOneWakesTheWriterInTheFuture (sixth red team,
// r6b): renumber-writer-status admits any status.dhcpv6pd.since in RFC 3339
// UTC to the second, year 0001 too, and decide believes a since in the
// past (a rotation at once). With two eligible nodes that disagree the
// pair and since stay, and the wake is put a bound past now by
// since + ConfirmWithin + (now - that) rounded up to bounds - but
// now.Sub of a time 2025 years back saturates at time.Duration's 292
// years, so the wake lands in year ~293, before now: the writer is asked to
// pass again at once, at every pass, for as long as the two disagree
// (FuzzAStolenTokenInTheBallotsMemory forges times at most 100000 h back).
func TestAForgedSinceInYearOneWakesTheWriterInTheFuture(t *testing.T) {
	for _, since := range []string{"0001-01-01T00:00:01Z", "1700-01-01T00:00:00Z", "2000-01-01T00:00:00Z"} {
		r := reports(t, heldA, "v1;wan=2001:db8:b00::/56 p offer")
		st := pdAt(dynamicprefix.DHCPv6PDStatus{Unconfirmed: trustCurrent, Since: since})
		passes, past := 0, 0
		for i, d := range feedBack(t, wanPD(), st, r, 10*time.Second, 3*ConfirmWithin) {
			now := t0.Add(time.Duration(i) * 10 * time.Second)
			passes++
			if !d.Wake.IsZero() && !d.Wake.After(now) {
				if past == 0 {
					t.Errorf("since %s, pass %d: the writer asks to be woken at %v, not after now (%v)", since, i, d.Wake, now)
				}
				past++
			}
		}
		if past > 0 {
			t.Errorf("since %s: %d of %d passes over %v asked for a wake at or before now", since, past, passes, 3*ConfirmWithin)
		}
	}
}
