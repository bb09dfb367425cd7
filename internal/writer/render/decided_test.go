package render

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

// The status the existing operator writes (no entry for the current prefix,
// its acquiredAt in the PrefixAcquired condition) reaches decide as it
// reads it, and a decision's history goes back to the served form with
// nothing lost: unset times stay unset, set ones keep their instant.
func TestTheServedStatusReachesDecideAndComesBack(t *testing.T) {
	at := func(m int) *metav1.Time { t := metav1.NewTime(t0.Add(time.Duration(m) * time.Minute)); return &t }
	pd := &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}
	served := api.Status{
		CurrentPrefix: "2001:db8:c::/64", PrefixSource: "router-advertisement", LeaseExpiresAt: at(90), DHCPv6PD: pd,
		History: []api.HistoryEntry{
			{Prefix: "2001:db8:a::/64", AcquiredAt: at(0), DeprecatedAt: at(10), State: "draining"},
			{Prefix: "2001:db8:b::/64", AcquiredAt: at(10), DeprecatedAt: at(20), ExpiresAt: at(30), State: "draining"},
		},
		Conditions: []metav1.Condition{
			{Type: PrefixAcquired, Status: metav1.ConditionTrue, Reason: "PrefixAcquired", LastTransitionTime: *at(20)},
			{Type: Ready, Status: metav1.ConditionFalse, Reason: "PoolError", LastTransitionTime: *at(25)},
		},
	}
	want := decide.Status{
		CurrentPrefix: "2001:db8:c::/64", PrefixSource: "router-advertisement", DHCPv6PD: pd,
		History: []decide.HistoryEntry{
			{Prefix: "2001:db8:a::/64", AcquiredAt: at(0).Time, DeprecatedAt: at(10).Time, State: "draining"},
			{Prefix: "2001:db8:b::/64", AcquiredAt: at(10).Time, DeprecatedAt: at(20).Time, ExpiresAt: at(30).Time, State: "draining"},
		},
		Conditions: []decide.Condition{
			{Type: PrefixAcquired, True: true, LastTransitionTime: at(20).Time},
			{Type: Ready, LastTransitionTime: at(25).Time},
		},
	}
	prior := Prior(served)
	if diff := cmp.Diff(want, prior); diff != "" {
		t.Errorf("prior (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(served.History, History(model.Model{}, prior.History)); diff != "" {
		t.Errorf("history back (-served +got):\n%s", diff)
	}
	if Prior(api.Status{}).History != nil || History(model.Model{}, nil) != nil {
		t.Error("no history became an empty one")
	}
}
