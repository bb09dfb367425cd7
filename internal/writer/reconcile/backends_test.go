package reconcile

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/backend"
)

func TestAPoolKindIsDroppedOnlyWhenDiscoveryAnswersWithoutIt(t *testing.T) {
	stopped := false
	kind := &backend.Kind{Name: "IPAddressPool", GVR: schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}}
	var answer error = errors.New("the server is currently unable to handle the request")
	r := &Reconciler{log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		discover: func() (Served, error) { return Served{}, answer },
		pools:    []*pooled{{kind: kind, stop: func() { stopped = true }}}}

	if changed, err := r.updateBackends(t.Context()); changed || err == nil || stopped || len(r.backends()) != 1 {
		t.Errorf("discovery failed: changed %v, err %v, stopped %v, %d kinds; want the kind kept", changed, err, stopped, len(r.backends()))
	}
	answer = nil // the API server answers: MetalLB was uninstalled
	if changed, err := r.updateBackends(t.Context()); !changed || err != nil || !stopped || len(r.backends()) != 0 {
		t.Errorf("kind gone: changed %v, err %v, stopped %v, %d kinds; want it stopped and dropped", changed, err, stopped, len(r.backends()))
	}
}
