package e2e

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
)

// TestAStolenWriterTokenWritesKubeVIPsConfigMapOnlyAsTheWriterDoes: beside
// r9a's two (the record, the key annotation), the other writes the
// opt-in Role lets the writer's token make to kube-vip's ConfigMap, each
// refused by the policy named: an entry outside the prefixes home's status
// names, recorded as the writer records its own (renumber-writer-values);
// the record taken out with the writer's entry, which leaves the ConfigMap
// recordless - the writer's next pass would own the IPv6 entries there
// inside home's prefixes, the user's among them (renumber-writer-values);
// the key and the record padded past 256 entries, all inside the status
// and recorded, which the other policies admit (renumber-writer-sizes:
// their cost stays bounded);
// another namespace's key, a label, and the record renumber wrote before
// (dynamic-prefix.io/managed-addresses, read where the record is not)
// naming the user's range (renumber-writer-kubevip). None of them changes
// the ConfigMap.
func TestAStolenWriterTokenWritesKubeVIPsConfigMapOnlyAsTheWriterDoes(t *testing.T) {
	const user = "192.0.2.100-192.0.2.110"
	w, token := kubeVIPUnderAStolenToken(t, user)
	ctx := t.Context()
	configMaps := w.API.Client.CoreV1().ConfigMaps("kube-system")
	before, err := configMaps.Get(ctx, "kubevip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := before.Annotations[backends.AnnotationKubeVIPRecord]
	const outside = "2001:db8:bad::-2001:db8:bad::ff"
	// 257 ranges inside home's current prefix: the key and the record
	// past the 256 entries renumber-writer-sizes lets them hold.
	var padding []string
	for i := range 257 {
		a := on(t, prefixA, fmt.Sprintf("::f000:0:0:%x", i+1))
		padding = append(padding, a+"-"+a)
	}
	padded := strings.Join(padding, ",")
	for _, c := range []struct {
		name, body, policy string
	}{
		{"an entry outside the status, recorded",
			fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"data":{"range-global":%q}}`,
				backends.AnnotationKubeVIPRecord, ours+","+outside, user+","+ours+","+outside),
			"renumber-writer-values"},
		{"the record taken out with the writer's entry",
			fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"data":{"range-global":%q}}`, backends.AnnotationKubeVIPRecord, user),
			"renumber-writer-values"},
		{"the key and the record padded past their bound, inside the status",
			fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"data":{"range-global":%q}}`,
				backends.AnnotationKubeVIPRecord, ours+","+padded, user+","+ours+","+padded),
			"renumber-writer-sizes"},
		{"another namespace's key", `{"data":{"cidr-default":"2001:db8:1:100::/64"}}`, "renumber-writer-kubevip"},
		{"a label", `{"metadata":{"labels":{"example.org/team":"x"}}}`, "renumber-writer-kubevip"},
		{"the record renumber wrote before, naming the user's range",
			fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, dynamicprefix.AnnotationManagedAddresses, user),
			"renumber-writer-kubevip"},
	} {
		_, err := token.CoreV1().ConfigMaps("kube-system").Patch(ctx, "kubevip", types.MergePatchType, []byte(c.body), metav1.PatchOptions{})
		if !denied(err) || !strings.Contains(err.Error(), "'"+c.policy+"'") {
			t.Errorf("%s: %v, want refused by %s", c.name, err, c.policy)
		}
	}
	after, err := configMaps.Get(ctx, "kubevip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(after.Labels, after.Annotations, after.Data), fmt.Sprint(before.Labels, before.Annotations, before.Data); got != want {
		t.Errorf("the token's writes changed kube-vip's ConfigMap: %s, was %s", got, want)
	}
}
