package controller

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corefake "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/writer/apply"
)

// The real API server's answers are exercised by e2e (TestBGPInstalledLater,
// TestMetalLBInstalledLater); this pins how each kind of answer is read.
func TestDiscoveryReadsServedResourcesAndReportsUnservedAsNotFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apis/cilium.io/v2":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"cilium.io/v2","resources":[{"name":"ciliumloadbalancerippools","namespaced":false,"kind":"CiliumLoadBalancerIPPool","verbs":["get","list","watch","patch"]}]}`))
		case "/apis/broken.io/v1":
			_, _ = w.Write([]byte(`{"resources":`))
		case "/apis/slow.io/v1":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`))
		}
	}))
	defer srv.Close()
	d, err := NewDiscovery(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	list, err := d.ServerResourcesForGroupVersion("cilium.io/v2")
	if err != nil || len(list.APIResources) != 1 || list.APIResources[0].Name != "ciliumloadbalancerippools" {
		t.Errorf("served group: %+v, %v", list, err)
	}
	if _, err := d.ServerResourcesForGroupVersion("metallb.io/v1beta1"); !apierrors.IsNotFound(err) {
		t.Errorf("unserved group: err = %v, want NotFound", err)
	}
	for _, gv := range []string{"broken.io/v1", "slow.io/v1"} {
		if _, err := d.ServerResourcesForGroupVersion(gv); err == nil || apierrors.IsNotFound(err) {
			t.Errorf("%s: err = %v, want an error that is not NotFound (a kind must not vanish)", gv, err)
		}
	}
}

// TestAPipelineAsksEachGroupOnce: building the writer asks discovery once
// what it serves - the pool kinds, Calico's IPPools and the
// CiliumBGPAdvertisements from the same answers - each version of each group
// once (it asked cilium.io and crd.projectcalico.org twice).
func TestAPipelineAsksEachGroupOnce(t *testing.T) {
	asked := map[string]int{}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/apis/cilium.io/v2":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"cilium.io/v2","resources":[{"name":"ciliumloadbalancerippools","kind":"CiliumLoadBalancerIPPool","verbs":["list"]},{"name":"ciliumbgpadvertisements","kind":"CiliumBGPAdvertisement","verbs":["list"]}]}`))
		case "/apis/crd.projectcalico.org/v1":
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"crd.projectcalico.org/v1","resources":[{"name":"ippools","kind":"IPPool","verbs":["list"]}]}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		}
	}))
	defer srv.Close()
	d, err := NewDiscovery(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	metaScheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(metaScheme); err != nil {
		t.Fatal(err)
	}
	cl := Clients{Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Metadata: metadatafake.NewSimpleMetadataClient(metaScheme),
		Core: &corefake.FakeCoreV1{Fake: &clienttesting.Fake{}}, Discovery: d}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := NewPipeline(Options{}, cl, &apply.EventRecorder{}, clocktesting.NewFakeClock(time.Now()), log)
	if _, gvr := p.Caches.Advertisements(); gvr.Resource != "ciliumbgpadvertisements" {
		t.Errorf("advertisements served as %v, want found", gvr)
	}
	if _, gvr := p.Caches.CalicoPools(); gvr.Resource != "ippools" {
		t.Errorf("IPPools served as %v, want found", gvr)
	}
	for path, n := range asked {
		if n != 1 {
			t.Errorf("%s asked %d times, want once", path, n)
		}
	}
}
