package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// TestExternalDNSTargetKeys: external-dns v0.22 reads only
// external-dns.kubernetes.io/target, earlier versions only the alpha key. By
// default the target goes under both, each in one Service write; a Service an
// earlier version managed under the alpha key alone is taken over; a key
// dropped from the list is released on every Service, the user's entries
// under it kept; a key that is not one stops the writer at start.
func TestExternalDNSTargetKeys(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	addr := func(host string) string {
		a, err := model.Splice(prefixA, netip.MustParseAddr(host))
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	a1, a2 := addr("::ffff:0:1"), addr("::ffff:0:2")
	for name, ann := range map[string]map[string]string{
		// As a writer before target keys existed left it: the alpha key, its
		// record, no keys record; the user's own name under the alpha key.
		"upgraded": {"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
			holdings.AnnotationIPs: a1, holdings.AnnotationManagedIPs: a1,
			holdings.AnnotationTargetAlpha: "legacy.example.org," + a1, holdings.AnnotationManagedTarget: a1},
		"fresh": {"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:2",
			holdings.AnnotationTarget: "fresh.example.org"},
	} {
		createService(t, w, name, ann)
	}
	startAgent(t, w, "node1")
	waitDigest(t, w, "node1", "prefix A", func(n digest.Node) bool {
		return len(n.Links) == 1 && len(n.Links[0].Prefixes) == 1 && n.Links[0].Prefixes[0].Prefix == prefixA
	})

	expect := func(name string, want map[string]string) {
		t.Helper()
		eventually(t, name+" targets", func() (bool, string) {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for k, v := range want {
				got, ok := s.Annotations[k]
				if got != v || (v == "" && ok) {
					return false, fmt.Sprintf("%s = %q, want %q", k, got, v)
				}
			}
			return true, ""
		})
	}
	writes := func(m world.Mark) []string { return serviceWrites(t, w, m) }
	both := holdings.AnnotationTarget + "," + holdings.AnnotationTargetAlpha
	oneEach := []string{"patch services fresh 200", "patch services upgraded 200"}

	m := mark(t, w)
	writer := startWriter(t, w, "writer-a")
	expect("upgraded", map[string]string{holdings.AnnotationTarget: a1, holdings.AnnotationTargetAlpha: "legacy.example.org," + a1,
		holdings.AnnotationManagedTarget: a1, holdings.AnnotationManagedTargetKeys: both})
	expect("fresh", map[string]string{holdings.AnnotationTarget: "fresh.example.org," + a2, holdings.AnnotationTargetAlpha: a2,
		holdings.AnnotationManagedTargetKeys: both})
	if got := writes(m); !slices.Equal(got, oneEach) {
		t.Errorf("Service writes taking over: %q, want one each %q", got, oneEach)
	}

	// external-dns upgraded to v0.22: the alpha key is dropped from the list.
	w.Stop(writer, 10*time.Second)
	m = mark(t, w)
	startWriter(t, w, "writer-a", "--external-dns-target-annotation-keys", holdings.AnnotationTarget)
	expect("upgraded", map[string]string{holdings.AnnotationTarget: a1, holdings.AnnotationTargetAlpha: "legacy.example.org",
		holdings.AnnotationManagedTarget: a1, holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget})
	expect("fresh", map[string]string{holdings.AnnotationTarget: "fresh.example.org," + a2, holdings.AnnotationTargetAlpha: "",
		holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget})
	if got := writes(m); !slices.Equal(got, oneEach) {
		t.Errorf("Service writes releasing the alpha key: %q, want one each %q", got, oneEach)
	}

	for _, bad := range []string{"not a key", holdings.AnnotationTarget + "," + holdings.AnnotationTarget, "dynamic-prefix.io/name"} {
		out, err := exec.Command(filepath.Join(binaries(t), "writer"), "--external-dns-target-annotation-keys", bad).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "target key") {
			t.Errorf("--external-dns-target-annotation-keys %q: %v, %q; want exit 2 naming the key", bad, err, out)
		}
	}
}
