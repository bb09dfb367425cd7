package controller

import (
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
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
