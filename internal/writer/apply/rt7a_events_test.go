package apply

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/writer/permit"
)

// Red team r7a: a tenant spends the event budget (its own Services' warnings:
// 100 Services with an invalid annotation, the default burst), and in that
// window a DynamicPrefix's own warning is dropped by the budget. permit.Events
// remembers it as announced all the same, so every later pass, with the
// budget full again, finds the text unchanged and never records it: the
// honest warning is silenced for as long as the problem lasts - the "memory of
// its own, which no tenant fills" notwithstanding, as the budget is shared.
func TestRT7AWarningDroppedByTheBudgetIsAnnouncedOnceItRefills(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	rec := &EventRecorder{Client: client.EventsV1(), Component: "renumber-writer", Instance: "w", Clock: clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Budget: permit.NewEventBudget(permit.Limits{EventBurst: 100, EventsPerMinute: 30})}
	e := &permit.Events{Recorder: rec, Clock: clk}
	tenant := func(i int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Service")
		u.SetNamespace("tenant")
		u.SetName(fmt.Sprintf("s%d", i))
		return u
	}
	dp := &unstructured.Unstructured{}
	dp.SetAPIVersion("dynamic-prefix.io/v1alpha1")
	dp.SetKind("DynamicPrefix")
	dp.SetName("home")
	for i := range 100 { // the tenant's Services, one warning each: the burst
		e.Announce(fmt.Sprintf("svc/tenant/s%d", i), tenant(i), true, "InvalidServiceAnnotations", "no such subnet")
	}
	warned := func() int {
		list, err := client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range list.Items {
			if ev.Reason == "RouterConflict" {
				n++
			}
		}
		return n
	}
	// The DynamicPrefix's problem begins now and lasts: every pass announces it.
	for range 10 {
		e.Announce(permit.OwnSubjects+"home/conflict", dp, true, "RouterConflict", "two routers disagree")
		clk.Step(time.Minute)
	}
	if got := warned(); got != 1 {
		t.Errorf("RouterConflict recorded in ten passes over ten minutes (the budget refilled after the first): %d events, want 1", got)
	}
}
