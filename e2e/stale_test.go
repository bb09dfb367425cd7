package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// TestSilentWatchIsDetectedAndHealed puts a proxy between the writers and the API
// server that can keep watch streams open while forwarding nothing.
func TestSilentWatchIsDetectedAndHealed(t *testing.T) {
	w := homeWorld(t, 1)
	ctx := t.Context()
	startAgent(t, w, "node1") // the agent talks to the API server directly
	proxy, err := w.API.NewWatchProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	id, err := w.API.ServiceAccount(ctx, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	via, err := w.API.Via(id, proxy.URL, "writer-via-proxy")
	if err != nil {
		t.Fatal(err)
	}
	// writer-a leads with the check disabled; writer-b stands by with it every 3 s.
	a := startWriter(t, w, "writer-a", "--kubeconfig", via.Kubeconfig, "--staleness-check", "0")
	eventually(t, "writer-a leads", func() (bool, string) {
		l, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "renumber-writer", metav1.GetOptions{})
		return err == nil && *l.Spec.HolderIdentity == "writer-a", ""
	})
	startWriter(t, w, "writer-b", "--kubeconfig", via.Kubeconfig, "--staleness-check", "3s")
	waitLog(t, w, "writer-b.log", "writer started", 1)
	wantA := []string{"192.0.2.0/24", prefixA.String()}
	eventually(t, "pool on A", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, wantA), fmt.Sprint(b)
	})

	proxy.Silence(true)
	advertise(t, w, prefixB, prefixA)
	waitDigest(t, w, "node1", "B reported", has(prefixB, false, digest.SourceRA))
	time.Sleep(12 * time.Second)
	if b := blocks(t, w, "lb"); !slices.Equal(b, wantA) {
		t.Fatalf("the leader without the check saw the change through a silent watch (%v): the proxy does not silence", b)
	}

	w.Stop(a, 10*time.Second) // hand over to writer-b, whose check has been running
	wantB := []string{"192.0.2.0/24", prefixB.String(), prefixA.String()}
	eventually(t, "writer-b applies B with watches still silent", func() (bool, string) {
		b := blocks(t, w, "lb")
		return slices.Equal(b, wantB), fmt.Sprint(b)
	})
	if countLog(w, "writer-b.log", "cache fell behind the API server") == 0 {
		t.Error("writer-b never reported its cache behind the API server")
	}
	if countLog(w, "writer-a.log", "cache fell behind") != 0 {
		t.Error("writer-a ran a check it had disabled")
	}
}
