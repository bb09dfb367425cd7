package election

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// recordLock is the Lease as the API server returns it: whatever was last
// written, by a writer or by a stolen token.
type recordLock struct {
	resourcelock.Interface
	rec resourcelock.LeaderElectionRecord
	raw []byte
}

func (l *recordLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := l.rec
	return &r, l.raw, nil
}

// client-go's leader election reads two things of a foreign record: the raw
// bytes, to see that it changed (and then restarts its own clock), and
// leaseDurationSeconds, how long after that it may take the Lease. A record
// written once by a stolen token must lapse as a crashed writer's does: a
// replica never waits longer than its own --lease-duration after the last
// change it saw. renewTime and acquireTime client-go never reads for expiry.
func TestAForeignRecordsDurationIsCappedAtTheReplicasOwn(t *testing.T) {
	far := metav1.NewTime(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name      string
		seconds   int
		wantUntil int
	}{
		{"the token's 68 years", 2147483647, 60},
		{"a longer duration than ours", 61, 60},
		{"our own", 60, 60},
		{"a shorter one (another release's setting) is kept", 15, 15},
		{"zero (expired at once) is kept", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(`{"holderIdentity":"renumber-writer-5d8f7c9b6-x2k4q"}`)
			inner := &recordLock{rec: resourcelock.LeaderElectionRecord{
				HolderIdentity: "renumber-writer-5d8f7c9b6-x2k4q", LeaseDurationSeconds: tt.seconds,
				AcquireTime: far, RenewTime: far, LeaderTransitions: 7,
			}, raw: raw}
			l := &countingLock{Interface: inner, now: time.Now, maxDuration: 60 * time.Second}
			got, gotRaw, err := l.Get(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got.LeaseDurationSeconds != tt.wantUntil {
				t.Errorf("leaseDurationSeconds handed to client-go = %d, want %d", got.LeaseDurationSeconds, tt.wantUntil)
			}
			if want := inner.rec; got.HolderIdentity != want.HolderIdentity || got.LeaderTransitions != want.LeaderTransitions || !got.RenewTime.Equal(&want.RenewTime) || !got.AcquireTime.Equal(&want.AcquireTime) {
				t.Errorf("record otherwise changed: got %+v, want %+v", got, want)
			}
			if string(gotRaw) != string(raw) {
				t.Errorf("raw record changed (client-go compares it to see a change): %s", gotRaw)
			}
		})
	}
}
