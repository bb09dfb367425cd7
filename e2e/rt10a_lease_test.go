package e2e

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/tools/world"
)

// TestRT10AStolenTokenHoldsNoLeaseBeyondItself (tenth red team, r10a):
// the writer's Role lets its token get and update the Lease
// renumber-writer, and no admission policy matches Leases. client-go's
// leader election believes the holder's own leaseDurationSeconds: a lease
// is valid until the time a replica first saw the record plus the
// duration that record names. One update of the stolen token's - another
// holder, leaseDurationSeconds 2147483647 (68 years), renewed now - and
// every writer follows that holder: the leader stops writing within its
// renew deadline, and no replica campaigns again while the record stands,
// however long after the token stopped (was revoked). A renumbering the
// nodes make meanwhile is never written: the Services keep the replaced
// prefix's addresses until the router's lifetimes for it end, then serve
// nothing, and DNS names answer the dead addresses. Seen only as
// RenumberNoWriterLeader, whose runbook points at crash-looping Pods and a
// slow API server; the fix (delete the Lease) is written nowhere.
//
// Here: two writers (lease 12 s, renew 8 s), home following A; the token's
// one update; the router renumbers to B; the token does nothing more. The
// change must land within five lease durations of the token's last write
// (a holder the writers never saw renew past their own lease duration is
// gone). Fix idea: countingLock.Get (internal/writer/election/lock.go)
// hands client-go the record with leaseDurationSeconds capped at the
// replica's own --lease-duration, so a foreign holder's claim lapses as a
// crashed writer's does; and an admission policy (renumber-writer-lease)
// admits from the token only the Lease the writer writes (its configured
// duration, a holder that is a writer Pod's name), so that while the token
// is live it must keep renewing to hold the writers off - visible, and
// over when it is revoked.
func TestRT10AStolenTokenHoldsNoLeaseBeyondItself(t *testing.T) {
	w, writers, _ := stallWorld(t, nil)
	ctx := t.Context()
	id, err := w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	token := kubernetes.NewForConfigOrDie(id.Config).CoordinationV1().Leases(world.Namespace)
	lease, err := token.Get(ctx, "renumber-writer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder, forever, now := "renumber-writer-5d8f7c9b6-x2k4q", int32(2147483647), metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime, lease.Spec.AcquireTime = &holder, &forever, &now, &now
	if _, err := token.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the token's update of the Lease refused (held): %v", err)
	}
	// The leader writes until its renew deadline passes: the renumbering
	// comes once no writer leads.
	eventually(t, "no writer leads after the token's update", func() (bool, string) {
		for _, n := range writers {
			if l := lastLine(w, n+".log", []string{"leading", "following", "lost the lease"}); strings.Contains(l, "leading") {
				return false, n + ": " + l
			}
		}
		return true, ""
	})
	advertise(t, w, prefixB, prefixA)
	eventuallyWithin(t, 60*time.Second, "the renumbering to B lands after the token's one Lease update", func() (bool, string) {
		st := dpStatus(t, w, "home")
		l, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "renumber-writer", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return st.CurrentPrefix == prefixB.String(), "current " + st.CurrentPrefix + ", Lease held by " + *l.Spec.HolderIdentity
	})
}
