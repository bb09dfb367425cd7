package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/render"
)

// A second DynamicPrefix in mode client on an interface whose client
// another one runs, on a node both may run on, adopts nothing there
// (model.LinkTakenBy: the first by name keeps the link, as the agents do),
// and says so once: one Warning naming the first, one status write.

var passLab = Key{Action: SyncDynamicPrefix, Name: "lab"}

// queued empties the queue of what was added to it, and returns the names
// of the DynamicPrefixes it asked a pass over, sorted.
func (f *fixture) queued() []string {
	var out []string
	for f.ctl.queue.Len() > 0 {
		k, _ := f.ctl.queue.Get()
		f.ctl.queue.Done(k)
		out = append(out, k.Name)
	}
	slices.Sort(out)
	return out
}

// taken asserts the DynamicPrefix name's status says its interface is
// taken (taken true) or does not.
func (f *fixture) taken(name string, taken bool) {
	f.t.Helper()
	st := f.statusOf(name)
	for _, typ := range []string{render.Degraded, render.DelegationConfirmed} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		switch {
		case c == nil:
			f.t.Errorf("%s has no condition %s", name, typ)
		case taken && (c.Reason != render.ReasonInterfaceTaken || !strings.Contains(c.Message, "DynamicPrefix home (first by name)")):
			f.t.Errorf("%s: %s %s %s, want %s naming home", name, typ, c.Status, c.Reason, render.ReasonInterfaceTaken)
		case !taken && c.Reason == render.ReasonInterfaceTaken:
			f.t.Errorf("%s: %s still %s %s: %s", name, typ, c.Status, c.Reason, c.Message)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, render.Degraded); taken && c != nil && c.Status != metav1.ConditionTrue {
		f.t.Errorf("%s: Degraded %s, want True", name, c.Status)
	}
}

// takeWan: change makes lab, second by name, ask for the client on wan
// where home runs it, on a node both may run on; lab's pass writes its
// status once, saying so, adopts nothing, and emits one Warning naming home.
func takeWan(t *testing.T, f *fixture, change func()) {
	t.Helper()
	f.events.reset()
	change()
	if got := f.sync(passLab); !slices.Equal(got, []string{"patch dynamicprefixes/status lab"}) {
		t.Fatalf("taking the interface wrote %q, want lab's status alone", got)
	}
	if want := []string{render.ReasonInterfaceTaken + " lab"}; !slices.Equal(f.events.reasons, want) || !slices.Equal(f.events.warnings, want) {
		t.Errorf("events %q (Warnings %q), want one Warning %q", f.events.reasons, f.events.warnings, want)
	}
	if len(f.events.messages) == 1 && !strings.Contains(f.events.messages[0], "DynamicPrefix home (first by name) runs the agents' DHCPv6 client on wan") {
		t.Errorf("the Warning does not name home: %q", f.events.messages[0])
	}
	f.taken("lab", true)
	if st := f.statusOf("lab"); st.CurrentPrefix != "" || st.DHCPv6PD != nil {
		t.Errorf("lab adopted %q (dhcpv6pd %+v) from home's delegation", st.CurrentPrefix, st.DHCPv6PD)
	}
	f.catchUp()
}

// rest asserts passes over home and lab, an hour apart, with nothing new,
// make no write and emit no event.
func (f *fixture) rest() {
	f.t.Helper()
	f.events.reset()
	for range 3 {
		f.clock.Step(time.Hour)
		for _, key := range []Key{passHome, passLab} {
			if got := f.sync(key); len(got) != 0 {
				f.t.Fatalf("%s: nothing new, yet the pass wrote %q", key, got)
			}
		}
	}
	if len(f.events.reasons) != 0 {
		f.t.Errorf("nothing new, yet events %q", f.events.reasons)
	}
}

func TestASecondClientOnATakenInterfaceIsRefusedOnce(t *testing.T) {
	f := pdConverged(t, 3)
	blocks, _ := f.pool()
	takeWan(t, f, func() {
		f.followPD("lab", pdSpec("wan"))
		f.ctl.DynamicPrefixChanged("lab")
		if got, want := f.queued(), []string{"home", "lab"}; !slices.Equal(got, want) {
			t.Errorf("lab's creation queued %q, want %q", got, want)
		}
		// The first by name keeps its link: untouched.
		if got := f.sync(passHome); len(got) != 0 {
			t.Errorf("lab's creation made home's pass write %q", got)
		}
	})
	f.rest()
	if st := f.status(); st.CurrentPrefix != delegA || !meta.IsStatusConditionTrue(st.Conditions, render.Ready) {
		t.Errorf("home: current %q, Ready %+v; want %s, Ready", st.CurrentPrefix, meta.FindStatusCondition(st.Conditions, render.Ready), delegA)
	}
	if got, _ := f.pool(); !slices.Equal(got, blocks) {
		t.Errorf("pool %q, want home's %q", got, blocks)
	}
}

// The refusal ends when the first no longer runs its client on the link
// on a node lab may run on: lab's condition clears in one status write,
// with no event; a later re-take announces again.
func TestATakenInterfaceFreedClearsAndARetakeAnnouncesAgain(t *testing.T) {
	for _, c := range []struct {
		name         string
		free, retake func(f *fixture)
	}{
		{
			name: "the first is deleted",
			free: func(f *fixture) {
				if err := f.dyn.Resource(api.GVR).Delete(f.t.Context(), "home", metav1.DeleteOptions{}); err != nil {
					f.t.Fatal(err)
				}
				f.catchUp()
			},
			retake: func(f *fixture) { f.followPD("home", pdSpec("wan")) },
		},
		{
			name: "the first is being deleted (a finalizer holds it)",
			free: func(f *fixture) {
				u, err := f.dyn.Resource(api.GVR).Get(f.t.Context(), "home", metav1.GetOptions{})
				if err != nil {
					f.t.Fatal(err)
				}
				u.SetFinalizers([]string{"dynamic-prefix.io/finalizer"})
				u.SetDeletionTimestamp(&metav1.Time{Time: f.clock.Now()})
				if _, err := f.dyn.Resource(api.GVR).Update(f.t.Context(), u, metav1.UpdateOptions{}); err != nil {
					f.t.Fatal(err)
				}
				f.catchUp()
			},
			retake: func(f *fixture) {
				if err := f.dyn.Resource(api.GVR).Delete(f.t.Context(), "home", metav1.DeleteOptions{}); err != nil {
					f.t.Fatal(err)
				}
				f.followPD("home", pdSpec("wan"))
			},
		},
		{
			name:   "the first moves to another interface",
			free:   func(f *fixture) { f.followPD("home", pdSpec("wan2")) },
			retake: func(f *fixture) { f.followPD("home", pdSpec("wan")) },
		},
		{
			name: "their nodeNames stop overlapping",
			free: func(f *fixture) {
				f.followPD("lab", pdSpec("wan", "node-2"))
				f.followPD("home", pdSpec("wan", "node-0", "node-1"))
			},
			retake: func(f *fixture) { f.followPD("home", pdSpec("wan")) },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := pdConverged(t, 3)
			takeWan(t, f, func() { f.followPD("lab", pdSpec("wan")) })
			f.queued()
			// The agents stop home's client on wan (or on node-2):
			// nobody holds or is offered anything there yet.
			f.delegations(pdNode{}, pdNode{}, pdNode{})
			f.events.reset()
			c.free(f)
			f.ctl.DynamicPrefixChanged("home")
			if got := f.queued(); !slices.Contains(got, "lab") {
				t.Errorf("home's change queued %q, not lab", got)
			}
			if got := f.sync(passLab); !slices.Equal(got, []string{"patch dynamicprefixes/status lab"}) {
				t.Fatalf("freeing the interface wrote %q, want lab's status alone", got)
			}
			if len(f.events.reasons) != 0 {
				t.Errorf("freeing the interface emitted %q", f.events.reasons)
			}
			f.taken("lab", false)
			if pd := f.statusOf("lab").DHCPv6PD; pd == nil || pd.ClientNode == "" {
				t.Errorf("lab's client is not named once the interface is free: %+v", pd)
			}
			f.catchUp()
			f.clock.Step(time.Hour)
			if got := f.sync(passLab); len(got) != 0 {
				t.Fatalf("freed, nothing new: wrote %q", got)
			}
			takeWan(t, f, func() { c.retake(f) })
			f.clock.Step(time.Hour)
			if got := f.sync(passLab); len(got) != 0 || len(f.events.reasons) != 1 {
				t.Fatalf("retaken, nothing new: wrote %q, events %q", got, f.events.reasons)
			}
		})
	}
}
