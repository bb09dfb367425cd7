package apply

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// SizeRefusal begins every message of the admission policy
// renumber-writer-sizes (manifests/writer/policy.yaml), which refuses the
// writer any object past the sizes it bounds (TestEverySizeRefusalIsRecognised
// keeps the two in step). The chart may rename the policy; its messages stay.
const SizeRefusal = "the writer may write only"

// refusedForItsSize reports whether err is the API server refusing a write
// because the object is too large for the writer to write: the object's own
// doing (a tenant can make its NetworkPolicy so), which no retry changes. It
// is final for that object alone; were it retried as transient, the pass
// would write no pool after an allow-list one tenant made too large.
func refusedForItsSize(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), SizeRefusal)
}
