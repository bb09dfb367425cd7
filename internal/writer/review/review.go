// Package review asks the API server whether a scraper's token may read the
// writer's metrics: a TokenReview, then a SubjectAccessReview. Both are
// questions the API server answers and stores nowhere - not writes, so they
// are made here and not through the write permit (package apply).
package review

import (
	"context"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/renumber/renumber/internal/metrics"
)

// Reviewer asks the API server whether a scraper's token may get /metrics
// (metrics.Reviewer): a TokenReview, then a SubjectAccessReview for the
// identity it names. The TokenReview names Audiences (metrics.Audience): a
// token minted for the API server is refused, and the scraper's is good for
// nothing but renumber's metrics.
type Reviewer struct {
	Tokens    authnv1client.TokenReviewsGetter
	Access    authzv1client.SubjectAccessReviewsGetter
	Audiences []string
}

// New builds a Reviewer on cfg (not the counted, gated config: the
// reviews are questions, not the writer's writes, and a follower answers
// scrapes too).
func New(cfg *rest.Config, audiences []string) (*Reviewer, error) {
	tokens, err := authnv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	access, err := authzv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Reviewer{Tokens: tokens, Access: access, Audiences: audiences}, nil
}

// Review implements metrics.Reviewer.
func (r *Reviewer) Review(ctx context.Context, token string) (metrics.Verdict, error) {
	tr, err := r.Tokens.TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: r.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if !tr.Status.Authenticated || !metrics.ForAudience(r.Audiences, tr.Status.Audiences) {
		return metrics.Unauthenticated, nil
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := r.Access.SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if !sar.Status.Allowed {
		return metrics.Forbidden, nil
	}
	return metrics.Allowed, nil
}
