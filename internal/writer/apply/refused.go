package apply

import (
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/permit"
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

// MetadataRefusal begins every message with which the field policies
// (renumber-writer-services, -gateways, -pools, -owned, -dynamicprefixes)
// refuse a change of
// a label, an annotation, a finalizer or an owner the writer does not write
// (TestEveryMetadataRefusalIsRecognised keeps them in step).
const MetadataRefusal = "the writer may not change"

// refusedForMetadata reports whether err is such a refusal. The writer
// writes only its own annotations (and, on a pool, its entries), so when
// its own write meets one, something changed the object between the
// writer's patch and the policy: a mutating admission webhook or policy
// that adds a label or an annotation on update (Kyverno, Gatekeeper's
// AssignMetadata, a MutatingAdmissionPolicy). No retry changes that: every
// write of the writer's to the object is refused until the admin lists the
// key in the policies' closed list of webhook keys (where nothing reads it
// for addresses: LB-IPAM pools, NetworkPolicies, DynamicPrefixes, the
// writer's own objects) or excludes the writer's ServiceAccount from it.
func refusedForMetadata(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), MetadataRefusal)
}

// RefusedForMetadata is the reason of the warning event the writer emits,
// once, on an object whose write refusedForMetadata.
const RefusedForMetadata = "WriteRefusedMetadataChanged"

// metadataRefusal is err, a refusal refusedForMetadata, saying its cause.
func metadataRefusal(what string, err error) error {
	return fmt.Errorf("%s: the admission policy refused the writer's write, which changes only what the writer owns, "+
		"so something changed the object on the way (a mutating webhook or policy adding labels or annotations on update?): "+
		"add the key it adds to the admission policies' webhookKeys (the chart's admissionPolicies.webhookKeys; it passes on LB-IPAM pools, "+
		"NetworkPolicies, DynamicPrefixes and the writer's own IPPools and BGP advertisements, never on Services, Gateways or pools "+
		"selected by label), or leave the writer's ServiceAccount out of the webhook (docs/security.md, Labels); "+
		"tried again quietly every %s: %w", what, RefusedLookAgain, err)
}

// failed is the outcome of the writer's write to self (regarding, for its
// event), for the DynamicPrefix dp, that failed with err: a refusal for
// metadata is said once - one warning event on the object, one log line -
// and final, the pass looking again quietly after RefusedLookAgain (retried
// with backoff, the same refusal filled the log at each retry; never
// looked at again, the object would wait for the next renumbering once the
// admin fixed the webhook); anything else is worth retrying. A later write
// that succeeds ends the announcement.
func (w *Writer) failed(self permit.Object, regarding *unstructured.Unstructured, dp, what string, err error) permit.Outcome {
	if !refusedForMetadata(err) {
		return permit.Transient(err)
	}
	err = metadataRefusal(what, err)
	if w.Events.Announce("refused/"+self.String(), regarding, true, RefusedForMetadata, err.Error()) {
		w.Log.Warn(err.Error())
	}
	w.Requeue(dp, RefusedLookAgain)
	return permit.Final(err)
}

// RefusedLookAgain is how long after a refusal for metadata the writer
// tries the object again: the cap of its retry backoff.
const RefusedLookAgain = 5 * time.Minute
