// A Kind is what the writer knows about a kind of pool: where its
// entries live, how they are read and written, and which annotation records the
// entries we own. Cilium's pools and CIDR groups, MetalLB's IPAddressPools and
// kube-vip's pool ConfigMap are Kinds; the reconciler handles them alike.

package backends

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// Kind is one resource that can follow a DynamicPrefix.
type Kind struct {
	Name       string // for logs and events
	Resource   string
	GVR        schema.GroupVersionResource
	Namespaced bool
	// RecordKey is the ownership record's annotation, spelled RecordSpelling
	// (both as the existing operator writes them).
	RecordKey      string
	RecordSpelling holdings.Spelling
	// LegacyRecordKeys are read when RecordKey is absent (a key renumber
	// wrote before it wrote the existing operator's); the next write moves
	// the record to RecordKey and removes them.
	LegacyRecordKeys []string
	// Form of the entries its objects hold (CIDR groups: CIDRs only).
	Form holdings.Form
	// Only, when set, is the one object of this kind followed, as
	// "namespace/name": RBAC allows the writer no other.
	Only string
	// Slot, when set, says where in an object the entries live and in which
	// form (kube-vip: the ConfigMap key its annotation names); nil: one place,
	// Form.
	Slot func(*unstructured.Unstructured) (slot string, form holdings.Form, err error)
	// Entries reads the pool's entries ("cidr" or "start-stop") at slot.
	Entries func(u *unstructured.Unstructured, slot string) ([]string, error)
	// Spec renders entries at slot as the fields of Top to merge-patch.
	Spec func(slot string, entries []string) (map[string]any, error)
	// Top is the object's field Spec renders ("spec" unless set).
	Top string
	// ClaimExact: without a record, only entries equal to one we would write
	// are ours - never every entry inside a managed prefix, the existing
	// operator's rule for its pools (a policy's one-host ipBlock must not
	// become the whole prefix).
	ClaimExact bool
	// Place, when set, renders Top from the live object rather than Spec from
	// entries alone (a NetworkPolicy's entries live in its rules): owned are
	// the entries written before, record those to write now; release says the
	// object is being let go.
	Place func(live *unstructured.Unstructured, owned, record []string, release bool) (map[string]any, error)
	// Kept, when set, is what the cache keeps of Top (Slim): all of it when
	// nil. A kind whose writes read the live object (Place) needs only its
	// entries there.
	Kept func(u *unstructured.Unstructured) any
	// Published, when set, reads the addresses the object's own controller
	// publishes in its status (a Gateway's status.addresses), which the
	// claims weigh as who holds an address (render.HeldByEcho): its owner
	// cannot write the status subresource, but chooses what it echoes (its
	// spec), so a Service's load balancer outweighs it. KeptStatus is what the cache
	// keeps of the status for it (SlimIn), past a bound only inside space
	// (holdings.BoundedIn; nil: everywhere).
	Published  func(u *unstructured.Unstructured) []string
	KeptStatus func(u *unstructured.Unstructured, space []netip.Prefix) any
	// FollowOf, when set, reads what an object of this kind asks for
	// (PoolFollowOf when nil: a pool's address-range and subnet); Keys are
	// the annotations it and Entries read, which the cache keeps (Slim)
	// beside the follow keys and the record.
	FollowOf func(u *unstructured.Unstructured) holdings.PoolFollow
	Keys     []string
	// Selects, when set, reads which Services the object gives addresses
	// to (a CiliumLoadBalancerIPPool's spec.serviceSelector), which the
	// advertisement of the subnet it uses selects too (Object.Selector).
	Selects func(u *unstructured.Unstructured) map[string]any
	// Annotate, when set, renders the annotations beside the record that a
	// write with Place sets (a Gateway's DNS target): nil values remove.
	Annotate func(live *unstructured.Unstructured, owned, record []string, release bool) map[string]any
	// AllowList: the kind's objects admit traffic from their entries (CIDR
	// groups, network sets, NetworkPolicies) rather than hand addresses out.
	// A pass writes them before anything else, and writes nothing else while
	// one of them could not be written, so a prefix is in every allow-list
	// before any address in it is; they lose it when its draining ends, in
	// the pass the pools do.
	AllowList bool
	// Claims: its objects ask for addresses as HA Services do (Gateways),
	// so they share the Services' rules: only the namespaces the
	// DynamicPrefix lets follow (spec.serviceNamespaces), and one address
	// to one object of them all, Services too (apply.Writer.Services
	// writes them, not Pools).
	Claims bool
	// Generated, when set, is the key ("namespace/name") of the Service
	// the kind's controller generates for the object ns/name and asks a
	// load balancer for its addresses with (Cilium's Gateway controller:
	// cilium-gateway-<name> beside the Gateway). What that load balancer
	// publishes for it, the object's status echoes (GeneratedPublished).
	Generated func(ns, name string) string
}

// Scope narrows the kind's informer to Only.
func (k *Kind) Scope() Scope {
	if k.Only == "" {
		return Scope{}
	}
	ns, name, _ := strings.Cut(k.Only, "/")
	return Scope{Namespace: ns, Fields: "metadata.name=" + name}
}

// Scope narrows a list and a watch to one namespace and to label and field
// selectors ("": no narrowing).
type Scope struct{ Namespace, Labels, Fields string }

// Options narrows o to the scope.
func (s Scope) Options(o metav1.ListOptions) metav1.ListOptions {
	o.LabelSelector, o.FieldSelector = s.Labels, s.Fields
	return o
}

// Cached is one pool kind and the cache of its objects, read (Pool) and
// indexed by the DynamicPrefix each follows (Indexers).
type Cached struct {
	Kind  *Kind
	Store cache.Indexer
}

// SplitAllowLists parts pools into the cluster-scoped allow-list kinds, the
// namespaced ones and the others, each in the order given. A pass writes the
// allow-lists first, and holds every address back while a cluster-scoped one
// could not take its prefixes. A namespaced one is a tenant's: whatever makes
// its write fail (its size, its own edits, a policy that times the API server
// out) is its own, reported and retried, and holds nobody else back - else one
// tenant able to create a NetworkPolicy could stall every pool.
func SplitAllowLists(pools []Cached) (cluster, namespaced, others []Cached) {
	for _, p := range pools {
		switch {
		case p.Kind.AllowList && !p.Kind.Namespaced:
			cluster = append(cluster, p)
		case p.Kind.AllowList:
			namespaced = append(namespaced, p)
		default:
			others = append(others, p)
		}
	}
	return cluster, namespaced, others
}

// Object is one pool-like object, backend-neutral.
type Object struct {
	Kind            *Kind
	Namespace, Name string
	ResourceVersion string
	Slot            string // where the entries live (Kind.Slot)
	// Held is what it follows and holds: its entries, in the form they take
	// at Slot, and our record, read under RecordFrom (RecordKey, or the
	// legacy key it was found under).
	holdings.Held
	RecordFrom string
	// Selector is which Services it gives addresses to (Kind.Selects).
	Selector map[string]any
}

// Key is the object's cache key: "name", or "namespace/name" when namespaced.
func (o Object) Key() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// Discovery answers which resources the API server serves in one group/version
// (client-go's discovery client has this method; so has controller.Discovery).
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Served returns resource -> version for the versions of group the API server
// serves, later versions overriding earlier ones. A version not served is not an
// error; failing to ask is (a pool kind must not vanish on a transient error).
func Served(disc Discovery, group string, versions ...string) (map[string]string, error) {
	served := map[string]string{}
	for _, v := range versions {
		list, err := disc.ServerResourcesForGroupVersion(group + "/" + v)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering %s/%s: %w", group, v, err)
		}
		for _, r := range list.APIResources {
			served[r.Name] = v
		}
	}
	return served, nil
}

// Decode reads an object of this kind. Objects that neither follow a
// DynamicPrefix nor carry our record are not ours (ok false).
func (k *Kind) Decode(u *unstructured.Unstructured) (Object, bool, error) {
	decoded.Add(1)
	ann := u.GetAnnotations()
	from := k.RecordKey
	rec, hasRecord := ann[from]
	for _, legacy := range k.LegacyRecordKeys {
		if !hasRecord {
			from = legacy
			rec, hasRecord = ann[legacy]
		}
	}
	follow := k.followOf(u)
	if follow.DynamicPrefix == "" && !hasRecord {
		return Object{}, false, nil
	}
	if _, ok := ann[oversized]; ok {
		return Object{}, true, fmt.Errorf("%w: its entries and the annotations renumber reads take more than %d bytes; it is left alone until they are fewer",
			ErrTooLarge, MaxKeptBytes)
	}
	slot, form := "", k.Form
	var err error
	if k.Slot != nil {
		if slot, form, err = k.Slot(u); err != nil {
			return Object{}, true, fmt.Errorf("decoding %s %q: %w", k.Name, u.GetName(), err)
		}
	}
	entries, err := k.Entries(u, slot)
	if err != nil {
		return Object{}, true, fmt.Errorf("decoding %s %q: %w", k.Name, u.GetName(), err)
	}
	var selector map[string]any
	if k.Selects != nil {
		selector = k.Selects(u)
	}
	// Every kind owns an entry only as its record spells it, as the
	// admission policies compare (holdings.Merge; red team r8 F1).
	record := holdings.ReadRecord(rec, hasRecord, k.RecordSpelling)
	return Object{
		Kind: k, Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion(), Slot: slot, Selector: selector,
		Held: holdings.Held{Follow: follow, Form: form, Entries: entries,
			Record: record, RecordValue: rec, Spelling: k.RecordSpelling},
		RecordFrom: from,
	}, true, nil
}

// decoded counts the objects Decode read.
var decoded atomic.Int64

// Decoded is how many objects Decode has read so far: a test and the
// writer's benchmark count the reads of a pass with it.
func Decoded() int64 { return decoded.Load() }

// Slim is the transform of this kind's informer. An object that neither
// follows a DynamicPrefix nor carries our record (Decode: not ours) is kept
// as its identity only - a cluster's other network sets and CIDR groups can
// be many and large (threat feeds), and the writer reads nothing of them.
// Of one that is ours the cache keeps its identity, the annotations the
// writer reads and the field its entries live in (Top; of a NetworkPolicy
// only its ipBlocks: Kept), at most MaxKeptBytes of them: whoever may create
// it can make it a megabyte, which costs the writer ten times that once
// decoded. Over the bound the object is kept as its identity, which
// DynamicPrefix it follows and a mark: Decode reports it too large, and it is
// never written.
func (k *Kind) Slim(o any) (any, error) { return k.SlimIn(o, nil) }

// SlimIn is Slim keeping what a load balancer publishes past its bound only
// inside space (Kind.KeptStatus; the DynamicPrefixes' space, caches.Caches.Space),
// as the Service cache does (holdings.SlimIn).
func (k *Kind) SlimIn(o any, space []netip.Prefix) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil
	}
	if !k.ours(u) {
		return identity(u), nil
	}
	slim := identity(u)
	ann := u.GetAnnotations()
	kept := map[string]string{}
	for _, key := range slices.Concat(followKeys, []string{AnnotationKubeVIPKey, oversized, k.RecordKey}, k.LegacyRecordKeys, k.Keys) {
		if v, ok := ann[key]; ok {
			kept[key] = v
		}
	}
	slim.SetAnnotations(kept)
	top := cmp.Or(k.Top, "spec")
	if v, found := u.Object[top]; found {
		if k.Kept != nil {
			v = k.Kept(u)
		}
		slim.Object[top] = v
	}
	if k.KeptStatus != nil {
		if v := k.KeptStatus(u, space); v != nil {
			slim.Object["status"] = v
		}
	}
	if jsonSize(slim.Object, MaxKeptBytes) > MaxKeptBytes {
		mark := identity(u)
		kept := map[string]string{oversized: ""}
		keepFollowing(kept, u)
		mark.SetAnnotations(kept)
		return mark, nil
	}
	return slim, nil
}

// PublishedOf is what u's controller publishes in its status
// (Kind.Published; none when the kind has no such status).
func (k *Kind) PublishedOf(u *unstructured.Unstructured) []string {
	if k.Published == nil || u == nil {
		return nil
	}
	return k.Published(u)
}

// followOf reads what u asks for (Kind.FollowOf).
func (k *Kind) followOf(u *unstructured.Unstructured) holdings.PoolFollow {
	if k.FollowOf != nil {
		return k.FollowOf(u)
	}
	return PoolFollowOf(u)
}

// ours reports whether u follows a DynamicPrefix or carries our record.
func (k *Kind) ours(u *unstructured.Unstructured) bool {
	if _, role := k.Follows(u); role != None {
		return true
	}
	ann := u.GetAnnotations()
	for _, key := range append([]string{k.RecordKey}, k.LegacyRecordKeys...) {
		if _, ok := ann[key]; ok {
			return true
		}
	}
	return false
}

// identity is what names u: kind, namespace, name, UID and version.
func identity(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	// Who asked first keeps an address (Kind.Claims).
	out.SetCreationTimestamp(u.GetCreationTimestamp())
	return out
}

// MaxKeptBytes bounds what a pool cache keeps of one object of ours (Slim),
// in bytes of JSON. The objects that follow a DynamicPrefix hold a few
// entries; 64 KiB is a thousand and more.
const MaxKeptBytes = 64 << 10

// oversized marks an object over MaxKeptBytes in the cache. It is not a
// valid annotation key, so no object in the API can carry it.
const oversized = "renumber oversized"

// ErrTooLarge: the object is over MaxKeptBytes; it is left alone until it is
// smaller.
var ErrTooLarge = errors.New("too large to follow")

// jsonSize is about how many bytes of JSON v takes (strings counted as they
// are, without escapes), counted no further than past limit.
func jsonSize(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			n += 2
			for k, e := range v {
				n += len(k) + 4
				walk(e)
			}
		case []any:
			n += 2
			for _, e := range v {
				n++
				walk(e)
			}
		case string:
			n += len(v) + 2
		default:
			n += 8 // numbers, booleans, null
		}
	}
	walk(v)
	return n
}

// Strings reads the list of strings at path verbatim: nothing when absent,
// an error when it is anything else.
func Strings(u *unstructured.Unstructured, path ...string) ([]string, error) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !found || raw == nil {
		return nil, err
	}
	field := strings.Join(path, ".")
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %T, not a list", field, raw)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s holds %T, not a string", field, e)
		}
		out = append(out, s)
	}
	return out, nil
}

// anys is v as a JSON list.
func anys(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

// listSpec renders the entries as the list field of spec, in order (Kind.Spec
// of a kind whose entries are one list of strings, read by Strings).
func listSpec(field string) func(slot string, entries []string) (map[string]any, error) {
	return func(_ string, entries []string) (map[string]any, error) {
		return map[string]any{field: anys(entries)}, nil
	}
}

// SameJSON reports whether a and b are the same in JSON (an int64 and a
// float64 of one value are: the API server gives numbers back as either).
func SameJSON(a, b any) bool {
	return reflect.DeepEqual(normalJSON(a), normalJSON(b))
}

func normalJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// ToMap turns a typed value into the map form a merge patch carries.
func ToMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}
