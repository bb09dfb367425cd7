package caches

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/renumber/renumber/internal/writer/backends"
)

func TestAPoolKindIsDroppedOnlyWhenDiscoveryAnswersWithoutIt(t *testing.T) {
	kind := &backends.Kind{Name: "IPAddressPool", GVR: schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}}
	var answer error = errors.New("the server is currently unable to handle the request")
	c := &Followed{log: slog.New(slog.NewTextHandler(io.Discard, nil)), dyn: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		discover: func() (Served, error) { return Served{}, answer }}
	c.pools = []*pooled{c.newPooled(kind)}

	if changed, err := c.updateKinds(t.Context()); changed || err == nil || len(c.Kinds()) != 1 {
		t.Errorf("discovery failed: changed %v, err %v, %d kinds; want the kind kept", changed, err, len(c.Kinds()))
	}
	answer = nil // the API server answers: MetalLB was uninstalled
	if changed, err := c.updateKinds(t.Context()); !changed || err != nil || len(c.Kinds()) != 0 {
		t.Errorf("kind gone: changed %v, err %v, %d kinds; want it dropped", changed, err, len(c.Kinds()))
	}
}
