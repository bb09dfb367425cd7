// EventRecorder records Kubernetes events (events.k8s.io/v1). Callers emit only at
// transitions, so each event is one create, written synchronously and counted
// like every other write.
package apply

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/writer/permit"
)

// EventRecorder creates events as Component/Instance.
type EventRecorder struct {
	Client    eventsv1client.EventsGetter // nil: events are only logged, at debug level (writer --dry-run)
	Component string
	Instance  string
	Clock     clock.Clock
	Log       *slog.Logger
	// Budget bounds the events recorded (nil: no bound).
	Budget *permit.EventBudget
	// OwnBudget bounds the events Own records (nil: Budget): a
	// DynamicPrefix's own warnings, which no node or tenant causes, have a
	// budget no node or tenant spends.
	OwnBudget *permit.EventBudget
}

// Own is r recording under OwnBudget (permit.OwnRecorder).
func (r *EventRecorder) Own() permit.Recorder {
	if r.OwnBudget == nil {
		return r
	}
	own := *r
	own.Budget, own.OwnBudget = r.OwnBudget, nil
	return &own
}

// Event records one event about regarding, and reports whether it did (a
// dry run's, logged, counts as recorded). Failures are logged, never fatal.
func (r *EventRecorder) Event(regarding *unstructured.Unstructured, warning bool, reason, note string) bool {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	ns := regarding.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	if len(note) > 1024 {
		note = note[:1021] + "..."
	}
	if r.Client == nil {
		r.Log.Debug("event not recorded (dry run)", "regarding", regarding.GetKind()+" "+regarding.GetName(), "reason", reason, "note", note)
		return true
	}
	now := r.Clock.Now()
	if r.Budget != nil {
		if ok, started := r.Budget.Take(now); !ok {
			if started {
				r.Log.Warn("events over their budget; dropping them until it refills (renumber_writer_events_total{outcome=\"dropped\"})", "reason", reason)
			}
			return false
		}
	}
	ev := &eventsv1.Event{
		// Named like client-go's recorder does: object name and time.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", regarding.GetName(), now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.Component,
		ReportingInstance:   r.Instance,
		Action:              "Reconcile",
		Reason:              reason,
		Note:                note,
		Type:                typ,
		Regarding: corev1.ObjectReference{
			APIVersion: regarding.GetAPIVersion(), Kind: regarding.GetKind(), Name: regarding.GetName(),
			Namespace: regarding.GetNamespace(), UID: regarding.GetUID(), ResourceVersion: regarding.GetResourceVersion(),
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Client.Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.Log.Warn("event not recorded", "reason", reason, "err", err)
		return false
	}
	return true
}
