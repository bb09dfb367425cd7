package apply

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
)

const livePolicy = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: lan
  namespace: home
  resourceVersion: "7"
  annotations: {dynamic-prefix.io/name: home}
spec:
  podSelector: {}
  ingress:
    - from:
        - podSelector: {matchLabels: {app: web}}
        - ipBlock: {cidr: 2001:db8:1::/64, except: [2001:db8:1::ff00:0/120]}
      ports: [{port: 443}]
    - from:
        - namespaceSelector: {}
`

// TestAPolicyIsWrittenFromTheLiveObject: the cache keeps of a NetworkPolicy
// its ipBlocks only (backends.Kind.Kept), so the write reads the policy from
// the API server: the user's peers, ports and rules are all in the patch
// (a merge patch replaces each list whole), and a policy changed since the
// cache read it is a conflict, not a write.
func TestAPolicyIsWrittenFromTheLiveObject(t *testing.T) {
	k := backends.NetworkPolicyKind()
	live := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(livePolicy), &live.Object); err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{k.GVR: "NetworkPolicyList"}, live.DeepCopy())
	var patches []string
	client.PrependReactor("patch", "networkpolicies", func(a clienttesting.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(clienttesting.PatchAction).GetPatch()))
		return true, live, nil
	})
	cached, _ := k.Slim(live.DeepCopy())
	po, _, err := k.Decode(cached.(*unstructured.Unstructured))
	if err != nil {
		t.Fatal(err)
	}
	owned, record := []string{"2001:db8:1::/64"}, []string{"2001:db8:2::/64", "2001:db8:1::/64"}
	write := holdings.Write{Owned: owned, Record: record, Value: holdings.WriteRecord(record, k.RecordSpelling)}
	if err := patchPool(context.Background(), client, k, po, write, false, nil); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"annotations":{"dynamic-prefix.io/managed-cidrs":"2001:db8:2::/64,2001:db8:1::/64"},"resourceVersion":"7"},` +
		`"spec":{"ingress":[{"from":[{"podSelector":{"matchLabels":{"app":"web"}}},` +
		`{"ipBlock":{"cidr":"2001:db8:2::/64","except":["2001:db8:2::ff00:0/120"]}},` +
		`{"ipBlock":{"cidr":"2001:db8:1::/64","except":["2001:db8:1::ff00:0/120"]}}],"ports":[{"port":443}]},` +
		`{"from":[{"namespaceSelector":{}}]}]}}`
	if diff := cmp.Diff([]string{want}, patches); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}

	po.ResourceVersion = "6" // the cache is behind
	if err := patchPool(context.Background(), client, k, po, write, false, nil); !apierrors.IsConflict(err) || len(patches) != 1 {
		t.Errorf("written from an older version: %v, %d patches; want a conflict and none", err, len(patches)-1)
	}
}
