package review

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/renumber/renumber/internal/metrics"
)

// The writer's TokenReview names renumber's audience, and a token the API
// server authenticates for another audience only is refused.
func TestATokenReviewNamesTheAudience(t *testing.T) {
	minted := map[string][]string{"for-metrics": {metrics.Audience}, "for-the-api-server": {"https://kubernetes.default.svc"}}
	var asked [][]string
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		asked = append(asked, tr.Spec.Audiences)
		for _, m := range minted[tr.Spec.Token] {
			if slices.Contains(tr.Spec.Audiences, m) || len(tr.Spec.Audiences) == 0 {
				tr.Status.Audiences = append(tr.Status.Audiences, m)
			}
		}
		tr.Status.Authenticated = len(tr.Status.Audiences) > 0
		tr.Status.User.Username = "system:serviceaccount:monitoring:prometheus"
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = true
		return true, sar, nil
	})
	r := &Reviewer{Tokens: cs.AuthenticationV1(), Access: cs.AuthorizationV1(), Audiences: []string{metrics.Audience}}
	for token, want := range map[string]metrics.Verdict{"for-metrics": metrics.Allowed, "for-the-api-server": metrics.Unauthenticated} {
		got, err := r.Review(t.Context(), token)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: verdict %d, want %d", token, got, want)
		}
	}
	if diff := cmp.Diff([][]string{{metrics.Audience}, {metrics.Audience}}, asked); diff != "" {
		t.Errorf("audiences of the TokenReviews (-want +got):\n%s", diff)
	}
}
