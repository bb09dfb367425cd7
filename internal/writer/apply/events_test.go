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

// budgeted is Events recording into a fake API under the default event
// budget (100 at once, 30 a minute), and a DynamicPrefix's own warnings
// under one of their own when own; recorded counts the events by reason.
func budgeted(t *testing.T, own bool) (e *permit.Events, clk *clocktesting.FakeClock, recorded func() map[string]int) {
	t.Helper()
	clk = clocktesting.NewFakeClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	limits := permit.Limits{EventBurst: 100, EventsPerMinute: 30}
	rec := &EventRecorder{Client: client.EventsV1(), Component: "renumber-writer", Instance: "w", Clock: clk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Budget: permit.NewEventBudget(limits)}
	if own {
		rec.OwnBudget = permit.NewEventBudget(limits)
	}
	return &permit.Events{Recorder: rec, Clock: clk}, clk, func() map[string]int {
		t.Helper()
		list, err := client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, ev := range list.Items {
			out[ev.Reason]++
		}
		return out
	}
}

// object is an object to record events about.
func object(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// A tenant that keeps the event budget spent (its Services' warnings,
// churned faster than the budget refills, ahead of the DynamicPrefix in
// every pass) does not spend the budget of a DynamicPrefix's own warnings:
// RouterConflict is recorded at its first announcement, once, and not
// again while it lasts. The tenant's own warnings stay within their budget.
func TestATenantSpendingTheEventBudgetDoesNotSpendTheDynamicPrefixs(t *testing.T) {
	e, clk, recorded := budgeted(t, true)
	tenant := func(i int) *unstructured.Unstructured {
		return object("v1", "Service", "tenant", fmt.Sprintf("s%d", i))
	}
	for i := range 100 { // the burst
		e.Announce(fmt.Sprintf("svc/tenant/s%d", i), tenant(i), true, "InvalidServiceAnnotations", "no such subnet")
	}
	for pass := range 10 {
		for i := range 40 { // churned: a new text each pass, more than the budget refills in a minute
			e.Announce(fmt.Sprintf("svc/tenant/s%d", i), tenant(i), true, "InvalidServiceAnnotations", fmt.Sprintf("no such subnet %d", pass))
		}
		e.Announce(permit.OwnSubjects+"home/conflict", object("dynamic-prefix.io/v1alpha1", "DynamicPrefix", "", "home"), true, "RouterConflict", "two routers disagree")
		clk.Step(time.Minute)
	}
	reasons := recorded()
	if reasons["RouterConflict"] != 1 {
		t.Errorf("RouterConflict recorded %d times in ten passes with the tenant's budget spent, want 1", reasons["RouterConflict"])
	}
	if n := reasons["InvalidServiceAnnotations"]; n > 100+10*30 {
		t.Errorf("%d tenant warnings recorded, more than its budget (100, then 30 a minute)", n)
	}
}
