package kubehttp

import (
	"context"

	"github.com/renumber/renumber/internal/metrics"
)

// Reviewer asks the API server whether a scraper's token may get /metrics
// (metrics.Reviewer): a TokenReview for Audiences, then a
// SubjectAccessReview for the identity it names. The agent's ServiceAccount
// may create both (the ClusterRole system:auth-delegator grants the same).
type Reviewer struct {
	Client *Client
	// Audiences the token must have been minted for (metrics.Audience): a
	// token for the API server is refused, and the scraper's token, made
	// for renumber alone, is worth nothing to the API server or to anyone
	// else who gets it.
	Audiences []string
}

type tokenReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Token     string   `json:"token,omitempty"`
		Audiences []string `json:"audiences,omitempty"`
	} `json:"spec"`
	Status struct {
		Authenticated bool     `json:"authenticated"`
		User          userInfo `json:"user"`
		Audiences     []string `json:"audiences,omitempty"`
	} `json:"status"`
}

type userInfo struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

type accessReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		User        string              `json:"user,omitempty"`
		UID         string              `json:"uid,omitempty"`
		Groups      []string            `json:"groups,omitempty"`
		Extra       map[string][]string `json:"extra,omitempty"`
		NonResource struct {
			Path string `json:"path"`
			Verb string `json:"verb"`
		} `json:"nonResourceAttributes"`
	} `json:"spec"`
	Status struct {
		Allowed bool `json:"allowed"`
	} `json:"status"`
}

// Review implements metrics.Reviewer.
func (r Reviewer) Review(ctx context.Context, token string) (metrics.Verdict, error) {
	tr := tokenReview{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}
	tr.Spec.Token, tr.Spec.Audiences = token, r.Audiences
	var trOut tokenReview
	if err := r.Client.Create(ctx, "/apis/authentication.k8s.io/v1/tokenreviews", tr, &trOut); err != nil {
		return 0, err
	}
	if !trOut.Status.Authenticated || !metrics.ForAudience(r.Audiences, trOut.Status.Audiences) {
		return metrics.Unauthenticated, nil
	}
	u := trOut.Status.User
	sar := accessReview{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}
	sar.Spec.User, sar.Spec.UID, sar.Spec.Groups, sar.Spec.Extra = u.Username, u.UID, u.Groups, u.Extra
	sar.Spec.NonResource.Path, sar.Spec.NonResource.Verb = "/metrics", "get"
	var sarOut accessReview
	if err := r.Client.Create(ctx, "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar, &sarOut); err != nil {
		return 0, err
	}
	if !sarOut.Status.Allowed {
		return metrics.Forbidden, nil
	}
	return metrics.Allowed, nil
}
