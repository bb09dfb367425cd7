package kubehttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/agent/kubeconfig"
	"github.com/renumber/renumber/internal/metrics"
)

// reviewServer answers TokenReviews as the API server does with audiences: a
// token is good for the audiences it was minted for that the review asks
// about; it records what it was asked.
type reviewServer struct {
	tokens  map[string][]string // token -> audiences it was minted for
	reviews [][]string          // the audiences each TokenReview named
}

func (a *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var in tokenReview
		_ = json.NewDecoder(r.Body).Decode(&in)
		a.reviews = append(a.reviews, in.Spec.Audiences)
		minted, ok := a.tokens[in.Spec.Token]
		var both []string
		for _, m := range minted {
			if len(in.Spec.Audiences) == 0 && m == "api" || slices.Contains(in.Spec.Audiences, m) {
				both = append(both, m)
			}
		}
		in.Status.Authenticated = ok && len(both) > 0
		in.Status.Audiences = both
		in.Status.User.Username = "system:serviceaccount:monitoring:prometheus"
		_ = json.NewEncoder(w).Encode(in)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var in accessReview
		_ = json.NewDecoder(r.Body).Decode(&in)
		in.Status.Allowed = true
		_ = json.NewEncoder(w).Encode(in)
	default:
		http.NotFound(w, r)
	}
}

// The TokenReview names renumber's audience, so the API server's own tokens
// (Prometheus's ServiceAccount token, a legacy Secret's) are refused, and
// only a token minted for renumber's metrics gets in.
func TestATokenReviewNamesTheAudience(t *testing.T) {
	api := &reviewServer{tokens: map[string][]string{"for-metrics": {metrics.Audience}, "for-the-api-server": {"api"}}}
	ts := httptest.NewServer(api)
	defer ts.Close()
	c, err := New(&kubeconfig.Config{Server: ts.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := Reviewer{Client: c, Audiences: []string{metrics.Audience}}
	for token, want := range map[string]metrics.Verdict{"for-metrics": metrics.Allowed, "for-the-api-server": metrics.Unauthenticated} {
		got, err := r.Review(t.Context(), token)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: verdict %d, want %d", token, got, want)
		}
	}
	if diff := cmp.Diff([][]string{{metrics.Audience}, {metrics.Audience}}, api.reviews); diff != "" {
		t.Errorf("audiences of the TokenReviews (-want +got):\n%s", diff)
	}
}
