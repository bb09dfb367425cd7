package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/apply"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Fixture tests in the manner of kubernetes/sample-controller: the caches are
// stores the test fills, the clients are client-go's fakes, and each test drives
// Sync and asserts the exact API actions it made. The same behaviours are
// proven against the real API server, audit-counted, in e2e/.

const (
	prefixA = "2001:db8:a::/64"
	prefixB = "2001:db8:b::/64"
)

var (
	poolGVR   = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: backends.PoolResource}
	bgpGVR    = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumbgpadvertisements"}
	calicoGVR = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: backends.CalicoResource}
)

type fixture struct {
	t      testing.TB
	dps    cache.Store
	svcs   cache.Indexer // Services read (holdings.ReadService)
	pools  cache.Indexer // the kind's Pools (backends.NewCache)
	bgp    cache.Indexer // CiliumBGPAdvertisements read (backends.NewAdvertisementCache); nil: not served
	calico cache.Indexer // Calico IPPools read (backends.NewIPPoolCache); nil: not served
	kind   *backends.Kind
	votes  *voters
	dyn    *dynamicfake.FakeDynamicClient
	meta   *metadatafake.FakeMetadataClient
	events *recorder
	clock  *clocktesting.FakeClock
	ctl    *Controller
	seen   map[string]string // object -> its content at the last catchUp
	rv     int
	writes []string // what the last sync wrote, in order (record)
	// allowLists are further pool kinds a test adds (after the pool lb).
	allowLists []backends.Cached
	// published is what web's load balancer publishes in its
	// status.loadBalancer.ingress (none until a test says).
	published []string
	// publishedFor is what another Service's load balancer publishes
	// ("namespace/name" -> its ingress).
	publishedFor map[string][]string
}

func (f *fixture) DynamicPrefixes() cache.Store { return f.dps }
func (f *fixture) Services() cache.Indexer      { return f.svcs }
func (f *fixture) Pools() []backends.Cached {
	return append([]backends.Cached{{Kind: f.kind, Store: f.pools}}, f.allowLists...)
}
func (f *fixture) Advertisements() (backends.Advertisements, schema.GroupVersionResource) {
	return backends.Advertisements{Store: f.bgp}, bgpGVR
}
func (f *fixture) CalicoPools() (backends.IPPools, schema.GroupVersionResource) {
	if f.calico == nil {
		return backends.IPPools{}, schema.GroupVersionResource{}
	}
	return backends.IPPools{Store: f.calico}, calicoGVR
}

type voters struct{ reports []decide.Report }

func (v *voters) Reports(time.Time) ([]decide.Report, time.Time) { return v.reports, time.Time{} }

// recorder keeps every event emitted, as "reason name" (reasons, and
// warnings for the Warnings alone) and "reason: message" (messages).
type recorder struct{ reasons, messages, warnings []string }

func (r *recorder) Event(u *unstructured.Unstructured, warning bool, reason, msg string) bool {
	r.reasons = append(r.reasons, reason+" "+u.GetName())
	r.messages = append(r.messages, reason+": "+msg)
	if warning {
		r.warnings = append(r.warnings, reason+" "+u.GetName())
	}
	return true
}

type discovery struct{}

func (discovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != "cilium.io/v2" {
		return &metav1.APIResourceList{}, nil
	}
	return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: backends.PoolResource}}}, nil
}

// newFixture is one DynamicPrefix "home" (HA mode, address range "lb"), a
// CiliumLoadBalancerIPPool "lb" following its range next to the user's IPv4
// block, and an HA Service "web" with a user's address, all as the user made
// them: nothing written by us yet.
func newFixture(t testing.TB, limits permit.Limits) *fixture {
	kinds, err := backends.CiliumKinds(discovery{})
	if err != nil || len(kinds) != 1 {
		t.Fatalf("kinds %v, %v", kinds, err)
	}
	dp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "home", "generation": int64(1), "resourceVersion": "1"},
		"spec": map[string]any{
			"acquisition":   map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
			"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
			"transition":    map[string]any{"mode": "ha"},
		},
	}}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "resourceVersion": "1", "annotations": map[string]any{
			dynamicprefix.AnnotationName: "home", dynamicprefix.AnnotationAddressRange: "lb"}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	}}
	svc := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", ResourceVersion: "1", Annotations: map[string]string{
			dynamicprefix.AnnotationName: "home", holdings.AnnotationSuffix: "::ffff:0:0:1", holdings.AnnotationIPs: "192.0.2.7"}},
	}
	scheme := runtime.NewScheme()
	metaScheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(metaScheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		t: t, kind: kinds[0], votes: &voters{}, events: &recorder{},
		dps:   cache.NewStore(cache.MetaNamespaceKeyFunc),
		svcs:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, backends.Indexers),
		pools: backends.NewCache(kinds[0]),
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
			api.GVR: "DynamicPrefixList", poolGVR: "CiliumLoadBalancerIPPoolList"}),
		meta:  metadatafake.NewSimpleMetadataClient(metaScheme, svc.DeepCopy()),
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)),
	}
	// Created under their resources: the fake would guess "dynamicprefixs".
	for gvr, u := range map[schema.GroupVersionResource]*unstructured.Unstructured{api.GVR: dp, poolGVR: pool} {
		if _, err := f.dyn.Resource(gvr).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.dyn.PrependReactor("*", "*", f.record)
	f.meta.PrependReactor("*", "*", f.record)
	f.ctl = NewController(Config{Budget: limits, TargetKeys: holdings.DefaultTargetKeys}, f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	f.catchUp()
	return f
}

var generous = permit.Limits{ObjectBurst: 100, ObjectPerMinute: 100, TotalBurst: 100, TotalPerMinute: 100}

// report makes every one of n nodes report prefix preferred on eth0 (and the
// previous one, if any, deprecated).
func (f *fixture) report(n int, preferred string, deprecated ...string) {
	entries := []digest.Prefix{{Prefix: netip.MustParsePrefix(preferred), Sources: digest.SourceRA}}
	for _, d := range deprecated {
		entries = append(entries, digest.Prefix{Prefix: netip.MustParsePrefix(d), Deprecated: true, Remaining: time.Hour, Sources: digest.SourceRA})
	}
	f.votes.reports = nil
	for i := range n {
		f.votes.reports = append(f.votes.reports, decide.Report{Node: fmt.Sprintf("node-%d", i),
			Digest: digest.Node{Links: []digest.Link{{Name: "eth0", Prefixes: entries}}}.Canonical()})
	}
}

// catchUp does what the API server and the informers do: an object whose
// content changed gets a new resourceVersion (the fake tracker gives none), and
// the caches show what the API holds.
func (f *fixture) catchUp() {
	f.t.Helper()
	ctx := f.t.Context()
	for gvr, store := range map[schema.GroupVersionResource]cache.Store{api.GVR: f.dps, poolGVR: f.pools} {
		list, err := f.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		var objs []any
		for i := range list.Items {
			u := &list.Items[i]
			if rv := f.bump(gvr.Resource+"/"+u.GetName(), u); rv != "" {
				u.SetResourceVersion(rv)
				if _, err := f.dyn.Resource(gvr).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
					f.t.Fatal(err)
				}
			}
			objs = append(objs, u)
		}
		if err := store.Replace(objs, ""); err != nil {
			f.t.Fatal(err)
		}
	}
	list, err := f.meta.Resource(holdings.ServiceGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	space := api.Space(f.dps.List()) // as the Service cache reads them (caches.Caches.Space)
	var objs []any
	for i := range list.Items {
		s := &corev1.Service{ObjectMeta: list.Items[i].ObjectMeta}
		ips := f.publishedFor[s.Namespace+"/"+s.Name]
		if s.Namespace == "default" && s.Name == "web" {
			ips = f.published
		}
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		if rv := f.bump("services/"+s.Name, s); rv != "" {
			s.ResourceVersion = rv
			body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q}}`, rv)
			if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace(s.Namespace).Patch(ctx, s.Name, "application/merge-patch+json", []byte(body), metav1.PatchOptions{}); err != nil {
				f.t.Fatal(err)
			}
		}
		objs = append(objs, holdings.ReadServiceIn(s, holdings.DefaultTargetKeys, space))
	}
	if err := f.svcs.Replace(objs, ""); err != nil {
		f.t.Fatal(err)
	}
	f.dyn.ClearActions()
	f.meta.ClearActions()
}

// bump returns a new resourceVersion when o's content changed since the last
// look ("" when it did not).
func (f *fixture) bump(key string, o metav1.Object) string {
	rv := o.GetResourceVersion()
	o.SetResourceVersion("")
	b, err := json.Marshal(o)
	o.SetResourceVersion(rv)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.seen == nil {
		f.seen = map[string]string{}
	}
	if f.seen[key] == string(b) {
		return ""
	}
	f.seen[key] = string(b)
	f.rv++
	return fmt.Sprint(100 + f.rv)
}

// sync runs one pass over home and returns the writes it made, as
// "verb resource[/subresource] name".
func (f *fixture) sync(key Key) []string {
	f.t.Helper()
	out := f.ordered(key)
	slices.Sort(out)
	return out
}

// settle is sync, then the caches catching up with what it wrote.
func (f *fixture) settle(key Key) []string {
	f.t.Helper()
	got := f.sync(key)
	f.catchUp()
	return got
}

// ordered is sync's writes in the order they were made.
func (f *fixture) ordered(key Key) []string {
	f.t.Helper()
	f.dyn.ClearActions()
	f.meta.ClearActions()
	f.writes = nil
	o := f.ctl.Sync(f.t.Context(), key)
	if o.Err != nil && o.Retry {
		f.t.Fatalf("sync %+v: %v", key, o.Err)
	}
	return f.writes
}

// record is a reactor on both clients: it notes every write, in the order
// made, and lets the fake go on to make it.
func (f *fixture) record(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetVerb() == "list" || a.GetVerb() == "watch" || a.GetVerb() == "get" {
		return false, nil, nil
	}
	res := a.GetResource().Resource
	if a.GetSubresource() != "" {
		res += "/" + a.GetSubresource()
	}
	name := ""
	if p, ok := a.(clienttesting.PatchAction); ok {
		name = p.GetName()
	}
	f.writes = append(f.writes, a.GetVerb()+" "+res+" "+name)
	return false, nil, nil
}

var passHome = Key{Action: SyncDynamicPrefix, Name: "home"}

func (f *fixture) pool() (blocks []string, record string) {
	f.t.Helper()
	u, err := f.dyn.Resource(poolGVR).Get(f.t.Context(), "lb", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	items, _, _ := unstructured.NestedSlice(u.Object, "spec", "blocks")
	for _, b := range items {
		m := b.(map[string]any)
		if c, ok := m["cidr"]; ok {
			blocks = append(blocks, c.(string))
		} else {
			blocks = append(blocks, m["start"].(string)+"-"+m["stop"].(string))
		}
	}
	return blocks, u.GetAnnotations()[dynamicprefix.AnnotationManagedBlock]
}

func (f *fixture) status() api.Status {
	f.t.Helper()
	return f.statusOf("home")
}

// statusOf is the status of the DynamicPrefix name as the API holds it.
func (f *fixture) statusOf(name string) api.Status {
	f.t.Helper()
	u, err := f.dyn.Resource(api.GVR).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	dp, err := api.FromUnstructured(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return dp.Status
}

func (f *fixture) condition(typ string) metav1.Condition {
	for _, c := range f.status().Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func rangeOn(p string) string {
	base := strings.TrimSuffix(p, "::/64")
	return base + ":0:f000::-" + base + ":0:ffff:ffff:ffff:ffff"
}

// converged: home follows prefix A and everything holds what it should.
func converged(t testing.TB, limits permit.Limits) *fixture {
	f := adopted(t, limits)
	f.catchUp()
	return f
}

// adopted: the first pass has written prefix A everywhere; the caches have
// not shown those writes yet.
func adopted(t testing.TB, limits permit.Limits) *fixture {
	f := newFixture(t, limits)
	f.report(3, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("first pass wrote %q, want %q", got, want)
	}
	return f
}

func TestAPassThatFindsNothingToChangeMakesNoAction(t *testing.T) {
	f := converged(t, generous)
	for range 3 {
		f.clock.Step(time.Minute)
		if got := f.sync(passHome); len(got) != 0 {
			t.Fatalf("nothing changed, yet the pass wrote %q", got)
		}
	}
	// A new leader term forgets what it wrote and trusts the caches alone.
	f.ctl.write.Forget()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("a new term with nothing changed wrote %q", got)
	}
}

func TestOnePrefixChangeIsOnePatchPerObject(t *testing.T) {
	f := converged(t, generous)
	f.report(3, prefixB, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("a prefix change wrote %q, want %q", got, want)
	}
	blocks, record := f.pool()
	if want := []string{"192.0.2.0/24", rangeOn(prefixB), rangeOn(prefixA)}; !slices.Equal(blocks, want) {
		t.Errorf("pool blocks = %q, want the user's block, then B, then A draining: %q", blocks, want)
	}
	// The record spells blocks as the existing operator does (compat.md).
	if want := "range=" + rangeOn(prefixB) + ",range=" + rangeOn(prefixA); record != want {
		t.Errorf("record = %q, want %q", record, want)
	}
	if st := f.status(); st.CurrentPrefix != prefixB || len(st.History) != 2 || st.History[1].State != model.StateDraining {
		t.Errorf("status = %s, history %+v", st.CurrentPrefix, st.History)
	}
	svc, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := svc.Annotations[holdings.AnnotationIPs], "192.0.2.7,2001:db8:b:0:ffff::1,2001:db8:a:0:ffff::1"; got != want {
		t.Errorf("%s = %q, want %q", holdings.AnnotationIPs, got, want)
	}
	for _, k := range holdings.DefaultTargetKeys {
		if got, want := svc.Annotations[k], "2001:db8:b:0:ffff::1"; got != want {
			t.Errorf("%s = %q, want the current address %q", k, got, want)
		}
	}
	// The pass before the informers caught up, and the one after, write nothing.
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again before the caches caught up: %q", got)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again after: %q", got)
	}
}

// A prefix no object holds yet is named in the status before any pool or
// Service gets an address in it (the writer's admission policy admits only
// addresses in the prefixes the status names), and the status is still
// written once.
func TestTheStatusNamesANewPrefixBeforeAnyObjectHoldsIt(t *testing.T) {
	f := newFixture(t, generous)
	f.report(3, prefixA)
	want := []string{"patch dynamicprefixes/status home", "patch ciliumloadbalancerippools lb", "patch services web"}
	if got := f.ordered(passHome); !slices.Equal(got, want) {
		t.Fatalf("the first adoption wrote %q, want %q in that order", got, want)
	}
	f.catchUp()
	f.report(3, prefixB, prefixA)
	if got := f.ordered(passHome); !slices.Equal(got, want) {
		t.Fatalf("a renumbering wrote %q, want %q in that order", got, want)
	}
	if st := f.status(); st.CurrentPrefix != prefixB || !meta.IsStatusConditionTrue(st.Conditions, render.PoolsSynced) {
		t.Errorf("status %s, PoolsSynced %+v", st.CurrentPrefix, meta.FindStatusCondition(st.Conditions, render.PoolsSynced))
	}
	// The pass's event tells the change from the status it found, not the
	// one it wrote first.
	if want := "PrefixChanged: following " + prefixB + " (was " + prefixA + ")"; !slices.Contains(f.events.messages, want) {
		t.Errorf("events %q, want %q", f.events.messages, want)
	}
}

// An allow-list the writer cannot write (the API server times out) holds
// back every pool, Service and advertisement of the pass: nothing hands out
// an address in a prefix an allow-list does not hold yet. The pass is
// retried; once the allow-list takes the prefix, the rest follows.
// withCIDRGroup gives f's DynamicPrefix home a CiliumCIDRGroup lan
// following it, an allow-list, beside its pool and Service.
func withCIDRGroup(t *testing.T, f *fixture) {
	t.Helper()
	kinds, err := backends.CiliumKinds(cidrGroups{})
	if err != nil || len(kinds) != 2 || !kinds[1].AllowList {
		t.Fatalf("kinds %v, %v", kinds, err)
	}
	groupGVR := schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumcidrgroups"}
	group := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "lan", "resourceVersion": "1", "annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"192.0.2.0/24"}},
	}}
	if _, err := f.dyn.Resource(groupGVR).Create(t.Context(), group, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	store := backends.NewCache(kinds[1])
	if err := store.Add(group); err != nil {
		t.Fatal(err)
	}
	f.allowLists = []backends.Cached{{Kind: kinds[1], Store: store}}
}

func TestAnAllowListNotWrittenHoldsEveryAddressBack(t *testing.T) {
	f := converged(t, generous)
	withCIDRGroup(t, f)
	down := true
	f.dyn.PrependReactor("patch", "ciliumcidrgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
		if down {
			return true, nil, errors.New("the API server timed out")
		}
		return false, nil, nil
	})

	f.report(3, prefixB, prefixA)
	f.writes = nil
	if o := f.ctl.Sync(t.Context(), passHome); o.Err == nil || !o.Retry {
		t.Fatalf("the failed allow-list write: %+v, want an error to retry", o)
	}
	// The failed patch is answered before record sees it: the status named
	// B first, and says after what failed.
	want := []string{"patch dynamicprefixes/status home", "patch dynamicprefixes/status home"}
	if !slices.Equal(f.writes, want) {
		t.Fatalf("with the allow-list down the pass wrote %q, want %q (no pool, no Service)", f.writes, want)
	}
	if !slices.ContainsFunc(f.dyn.Actions(), func(a clienttesting.Action) bool {
		return a.GetVerb() == "patch" && a.GetResource().Resource == "ciliumcidrgroups"
	}) {
		t.Error("the allow-list was never tried")
	}
	if blocks, _ := f.pool(); slices.ContainsFunc(blocks, func(b string) bool { return strings.HasPrefix(b, "2001:db8:2:") }) {
		t.Errorf("pool lb holds B (%q) while the allow-list does not", blocks)
	}

	down = false
	f.catchUp()
	got := f.ordered(passHome)
	if len(got) < 3 || got[0] != "patch ciliumcidrgroups lan" || !slices.Contains(got, "patch ciliumloadbalancerippools lb") || !slices.Contains(got, "patch services web") {
		t.Errorf("the retried pass wrote %q, want the allow-list first, then the pool and the Service", got)
	}
}

func TestAnAllowListTooLargeToWriteHoldsNothingElseBack(t *testing.T) {
	f := converged(t, generous)
	withCIDRGroup(t, f)
	// A tenant made its allow-list larger than renumber-writer-sizes lets
	// the writer write: no retry changes that, so it must not hold back the
	// pools and Services of everyone else.
	f.dyn.PrependReactor("patch", "ciliumcidrgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "cilium.io", Resource: "ciliumcidrgroups"}, "lan",
			errors.New("ValidatingAdmissionPolicy 'renumber-writer-sizes' with binding 'renumber-writer-sizes' denied request: "+apply.SizeRefusal+" pools of at most 256 entries"))
	})

	f.report(3, prefixB, prefixA)
	f.writes = nil
	if o := f.ctl.Sync(t.Context(), passHome); o.Retry {
		t.Fatalf("the refused allow-list: %+v, want an outcome not retried", o)
	}
	if !slices.Contains(f.writes, "patch ciliumloadbalancerippools lb") || !slices.Contains(f.writes, "patch services web") {
		t.Errorf("with one allow-list refused for its size the pass wrote %q, want the pool and the Service too", f.writes)
	}
	if c := f.condition(render.PoolsSynced); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "lan") {
		t.Errorf("PoolsSynced %s %q, want False naming the refused allow-list lan", c.Status, c.Message)
	}
}

// cidrGroups serves Cilium's pool and CIDR group kinds.
type cidrGroups struct{}

func (cidrGroups) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != "cilium.io/v2" {
		return &metav1.APIResourceList{}, nil
	}
	return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: backends.PoolResource}, {Name: "ciliumcidrgroups"}}}, nil
}

// When a pool write fails after the status named the new prefix, the status
// is written again in the same pass, saying so.
func TestAPoolWriteThatFailsAfterTheStatusIsSaidInIt(t *testing.T) {
	f := converged(t, generous)
	f.dyn.PrependReactor("patch", backends.PoolResource, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server timed out")
	})
	f.report(3, prefixB, prefixA)
	f.dyn.ClearActions()
	if o := f.ctl.Sync(t.Context(), passHome); o.Err == nil || !o.Retry {
		t.Fatalf("the failed pool write: %+v, want an error to retry", o)
	}
	var statuses []string
	for _, a := range f.dyn.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetSubresource() == "status" {
			statuses = append(statuses, string(p.GetPatch()))
		}
	}
	if len(statuses) != 2 || !strings.Contains(statuses[0], prefixB) || !strings.Contains(statuses[1], "the API server timed out") {
		t.Fatalf("status patches %q, want one naming %s, then one with the failure", statuses, prefixB)
	}
	if c := f.condition(render.PoolsSynced); c.Status != metav1.ConditionFalse {
		t.Errorf("PoolsSynced %+v after a failed pool write", c)
	}
}

// A drain that ends takes the old prefix out of the pools first; the status,
// which names fewer prefixes, follows them.
func TestADrainThatEndsEmptiesThePoolsBeforeTheStatus(t *testing.T) {
	f := converged(t, generous)
	f.report(3, prefixB, prefixA)
	f.sync(passHome)
	f.catchUp()
	f.clock.Step(2 * time.Hour)
	f.report(3, prefixB)
	want := []string{"patch ciliumloadbalancerippools lb", "patch services web", "patch dynamicprefixes/status home"}
	if got := f.ordered(passHome); !slices.Equal(got, want) {
		t.Fatalf("the end of a drain wrote %q, want %q in that order", got, want)
	}
}

// The router goes quiet: no node reports the current prefix any more. It
// stays current and in the pools (Services keep working), and status says so
// - one status write, one event; when it is reported again, conditions clear
// with one status write and no pool write.
func TestAQuietRouterIsReportedNotActedOn(t *testing.T) {
	f := converged(t, generous)
	blocksBefore, _ := f.pool()
	f.votes.reports = nil
	for i := range 3 {
		f.votes.reports = append(f.votes.reports, decide.Report{Node: fmt.Sprintf("node-%d", i),
			Digest: digest.Node{Links: []digest.Link{{Name: "eth0"}}}})
	}
	f.events.reasons = nil
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("quiet router: wrote %q, want %q", got, want)
	}
	if c := f.condition("PrefixAcquired"); c.Status != metav1.ConditionFalse || c.Reason != "PrefixNotReported" {
		t.Errorf("PrefixAcquired = %s %s", c.Status, c.Reason)
	}
	if c := f.condition("Degraded"); c.Status != metav1.ConditionTrue || c.Reason != "PrefixNotReported" {
		t.Errorf("Degraded = %s %s", c.Status, c.Reason)
	}
	if st := f.status(); st.CurrentPrefix != prefixA {
		t.Errorf("current prefix %q, want %s kept", st.CurrentPrefix, prefixA)
	}
	if blocks, _ := f.pool(); !slices.Equal(blocks, blocksBefore) {
		t.Errorf("pool %q, want it unchanged %q", blocks, blocksBefore)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("still quiet: wrote %q", got)
	}
	f.report(3, prefixA)
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("reported again: wrote %q, want %q", got, want)
	}
	if c := f.condition("PrefixAcquired"); c.Status != metav1.ConditionTrue {
		t.Errorf("PrefixAcquired = %s %s after the router came back", c.Status, c.Reason)
	}
	if want := []string{"PrefixNotReported home", "PrefixReported home"}; !slices.Equal(f.events.reasons, want) {
		t.Errorf("events %q, want %q", f.events.reasons, want)
	}
}

// publish stands for the load balancer (Cilium's LB-IPAM) publishing ips in
// web's status.loadBalancer.ingress.
func (f *fixture) publish(ips ...string) {
	f.published = ips
	f.catchUp()
}

// DNS follows the address: a change asks for the new address at once and
// keeps the target on the old one, which still answers; the load balancer
// publishing the new address moves the target, in a second Service write.
func TestTheTargetMovesOnceTheLoadBalancerPublishesTheAddress(t *testing.T) {
	f := converged(t, generous)
	f.publish("192.0.2.7", onA)
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("the load balancer publishing what we asked for made us write %q", got)
	}
	f.report(3, prefixB, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("the change wrote %q, want %q", got, want)
	}
	ann := f.service()
	if got, want := ann[holdings.AnnotationIPs], "192.0.2.7,"+onB+","+onA; got != want {
		t.Errorf("%s = %q, want the new address asked for at once: %q", holdings.AnnotationIPs, got, want)
	}
	for _, k := range holdings.DefaultTargetKeys {
		if ann[k] != onA {
			t.Errorf("%s = %q before the new address is published, want the old one %s", k, ann[k], onA)
		}
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("waiting for the load balancer wrote %q", got)
	}
	f.publish("192.0.2.7", onB, onA)
	if got, want := f.sync(passHome), []string{"patch services web"}; !slices.Equal(got, want) {
		t.Fatalf("the new address published: wrote %q, want %q", got, want)
	}
	for _, k := range holdings.DefaultTargetKeys {
		if ann := f.service(); ann[k] != onB {
			t.Errorf("%s = %q once published, want %s", k, ann[k], onB)
		}
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again: %q", got)
	}
}

// On a Cilium whose L2 announcer misses added addresses, the nudge rides in
// the write that moves the target: a renumbering still costs the Service two
// writes, and the load balancer publishing nothing new costs none.
func TestTheL2NudgeRidesWithTheTargetMove(t *testing.T) {
	f := converged(t, generous)
	f.ctl.cfg.L2Nudge = func() bool { return true }
	f.ctl.write.L2Nudge = f.ctl.cfg.L2Nudge
	f.publish("192.0.2.7", onA)
	if got, want := f.sync(passHome), []string{"patch services web"}; !slices.Equal(got, want) {
		t.Fatalf("the first address published: wrote %q, want the nudge %q", got, want)
	}
	if got := f.service()[holdings.AnnotationL2Nudged]; got != onA {
		t.Errorf("nudge = %q, want %q", got, onA)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("nudged already, yet wrote %q", got)
	}
	f.report(3, prefixB, prefixA)
	if got := f.sync(passHome); !slices.Contains(got, "patch services web") {
		t.Fatalf("the change wrote %q, want the Service asked for the new address", got)
	}
	f.catchUp()
	f.publish("192.0.2.7", onB, onA)
	if got, want := f.sync(passHome), []string{"patch services web"}; !slices.Equal(got, want) {
		t.Fatalf("the new address published: wrote %q, want one write %q", got, want)
	}
	if ann := f.service(); ann[holdings.AnnotationL2Nudged] != onB+","+onA || ann[holdings.AnnotationTarget] != onB {
		t.Errorf("nudge %q target %q: want both in the one write", ann[holdings.AnnotationL2Nudged], ann[holdings.AnnotationTarget])
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again: %q", got)
	}
}

// edit merge-patches an object as a user (or another controller) would, and
// lets the caches catch up.
func (f *fixture) edit(gvr schema.GroupVersionResource, name, body string) {
	f.t.Helper()
	if _, err := f.dyn.Resource(gvr).Patch(f.t.Context(), name, "application/merge-patch+json", []byte(body), metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.catchUp()
}

// poolEvent is the key the pool lb's cache event queues.
func (f *fixture) poolEvent() Key {
	f.t.Helper()
	p, _, _ := f.pools.GetByKey("lb")
	f.ctl.PoolChanged(p.(*backends.Pool))
	key, _ := f.ctl.queue.Get()
	f.ctl.queue.Done(key)
	return key
}

// fight stands for another controller rewriting the pool to drop our entries.
func (f *fixture) fight(rv string) {
	f.t.Helper()
	f.edit(poolGVR, "lb", fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"blocks":[{"cidr":"192.0.2.0/24"}]}}`, rv))
}

func TestAThrottledObjectGetsNoActionAndTheCondition(t *testing.T) {
	f := converged(t, generous)
	// The same world under a controller whose breaker allows one write per object.
	f.ctl = NewController(Config{TargetKeys: holdings.DefaultTargetKeys, Budget: permit.Limits{ObjectBurst: 1, ObjectPerMinute: 0.01, TotalBurst: 100, TotalPerMinute: 100}},
		f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	f.fight("2")
	if got, want := f.sync(passHome), []string{"patch ciliumloadbalancerippools lb"}; !slices.Equal(got, want) {
		t.Fatalf("first fight: wrote %q, want %q", got, want)
	}
	f.fight("3")
	got := f.sync(passHome)
	if want := []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("second fight: wrote %q, want only the status (no pool write): %q", got, want)
	}
	if c := f.condition("PoolsSynced"); c.Status != metav1.ConditionFalse || c.Reason != "WriteBudgetExceeded" {
		t.Errorf("PoolsSynced = %s %s, want False WriteBudgetExceeded", c.Status, c.Reason)
	}
	if !slices.Contains(f.events.reasons, "WriteBudgetExceeded lb") {
		t.Errorf("events %q, want WriteBudgetExceeded", f.events.reasons)
	}
	if f.ctl.breaker.Throttled() != 1 {
		t.Errorf("%d throttled objects, want 1", f.ctl.breaker.Throttled())
	}
}

// TestRenumberingsPassTheBreakerAFightDoesNot: under a breaker that allows
// one write per object and then almost none, five quick renumberings still
// reach every object with one write each (new decisions); another client
// reverting the pool under an unchanged decision is throttled as before,
// once the decision's free writes (permit.FreeWrites, the renumbering's
// one among them) and the bucket's one permit are spent.
func TestRenumberingsPassTheBreakerAFightDoesNot(t *testing.T) {
	f := converged(t, generous)
	f.ctl = NewController(Config{TargetKeys: holdings.DefaultTargetKeys, Budget: permit.Limits{ObjectBurst: 1, ObjectPerMinute: 0.01,
		TotalBurst: 100, TotalPerMinute: 100, DecisionBurst: 20, DecisionsPerMinute: 10}},
		f, f.votes, f.dyn, f.meta, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	f.sync(passHome) // the new controller's first decision: nothing to write
	prefixes := []string{prefixA, prefixB, "2001:db8:3::/64", "2001:db8:4::/64", "2001:db8:5::/64", "2001:db8:6::/64"}
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	for i := 1; i < len(prefixes); i++ {
		f.clock.Step(time.Second)
		f.report(3, prefixes[i], prefixes[i-1])
		if got := f.sync(passHome); !slices.Equal(got, want) {
			t.Fatalf("renumbering %d wrote %q, want %q", i, got, want)
		}
		f.catchUp()
	}
	for i := range permit.FreeWrites - 1 + 1 {
		f.fight(fmt.Sprint(9 + i))
		if got := f.sync(passHome); !slices.Equal(got, []string{"patch ciliumloadbalancerippools lb"}) {
			t.Fatalf("revert %d: wrote %q, want the pool (free, then from its bucket)", i+1, got)
		}
		f.catchUp()
	}
	f.fight(fmt.Sprint(9 + permit.FreeWrites))
	if got := f.sync(passHome); slices.Contains(got, "patch ciliumloadbalancerippools lb") {
		t.Errorf("revert %d under the same decision: wrote %q, want the pool throttled", permit.FreeWrites+1, got)
	}
	if f.ctl.breaker.Throttled() != 1 {
		t.Errorf("%d throttled objects, want 1", f.ctl.breaker.Throttled())
	}
}

func TestAReleasedPoolLosesOnlyItsManagedEntries(t *testing.T) {
	f := converged(t, generous)
	f.edit(poolGVR, "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/name":null,"dynamic-prefix.io/address-range":null}}}`)
	key := f.poolEvent() // the handler turns the pool's change into a release key
	if want := (Key{Action: ReleasePool, Resource: backends.PoolResource, Name: "lb"}); key != want {
		t.Fatalf("queued %+v, want %+v", key, want)
	}
	if got, want := f.sync(key), []string{"patch ciliumloadbalancerippools lb"}; !slices.Equal(got, want) {
		t.Fatalf("release wrote %q, want %q", got, want)
	}
	blocks, record := f.pool()
	if !slices.Equal(blocks, []string{"192.0.2.0/24"}) || record != "" {
		t.Errorf("after release: blocks %q, record %q; want only the user's block and no record", blocks, record)
	}
	f.catchUp()
	if got := f.sync(key); len(got) != 0 {
		t.Errorf("releasing again wrote %q", got)
	}
}

func TestAnInvalidPoolReferenceWritesOnlyStatus(t *testing.T) {
	f := converged(t, generous)
	f.edit(poolGVR, "lb", `{"metadata":{"annotations":{"dynamic-prefix.io/address-range":"nope"}}}`)
	o := f.ctl.Sync(t.Context(), passHome)
	if o.Retry || o.Err != nil {
		t.Errorf("outcome %+v: a user's mistake is not retried", o)
	}
	got := f.sync(passHome)
	if len(got) != 0 {
		t.Errorf("the same mistake again wrote %q", got)
	}
	if c := f.condition("PoolsSynced"); c.Status != metav1.ConditionFalse || c.Reason != "PoolError" {
		t.Errorf("PoolsSynced = %s %s, want False PoolError", c.Status, c.Reason)
	}
	n := 0
	for _, r := range f.events.reasons {
		if r == "InvalidPoolReference lb" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("events %q: want one InvalidPoolReference for two passes", f.events.reasons)
	}
}

// The status patch carries only status and the version of the object it was
// computed from (a concurrent change is a conflict, never overwritten).
func TestStatusPatchCarriesOnlyStatus(t *testing.T) {
	f := newFixture(t, generous)
	f.report(1, prefixA)
	cached, _, _ := f.dps.GetByKey("home")
	base := cached.(*unstructured.Unstructured).GetResourceVersion()
	f.ctl.Sync(t.Context(), passHome)
	for _, a := range f.dyn.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetSubresource() != "status" {
			continue
		}
		var body map[string]map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		if len(body) != 2 || len(body["metadata"]) != 1 || body["metadata"]["resourceVersion"] != base {
			t.Errorf("status patch %s: want status and metadata.resourceVersion only", p.GetPatch())
		}
		return
	}
	t.Error("no status patch")
}

// A pool whose entries cannot be read is reported by a pass over the
// DynamicPrefix it names (condition and event), and never written.
func TestAGarbledPoolIsReportedNotWritten(t *testing.T) {
	f := converged(t, generous)
	f.edit(poolGVR, "lb", `{"spec":{"blocks":"not a list"}}`)
	key := f.poolEvent()
	if key != passHome {
		t.Fatalf("queued %+v, want a pass over home", key)
	}
	if got, want := f.sync(key), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("wrote %q, want only the status", got)
	}
	if c := f.condition("PoolsSynced"); c.Status != metav1.ConditionFalse {
		t.Errorf("PoolsSynced = %s %s, want False", c.Status, c.Reason)
	}
	if !slices.Contains(f.events.reasons, "InvalidPool lb") {
		t.Errorf("events %q, want InvalidPool", f.events.reasons)
	}
}

func (f *fixture) service() map[string]string {
	f.t.Helper()
	svc, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Get(f.t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return svc.Annotations
}

// Deleting a DynamicPrefix releases what was written for it - one patch per
// object, one event each - and leaves the user's entries.
func TestADeletedDynamicPrefixReleasesWhatItWrote(t *testing.T) {
	f := converged(t, generous)
	if err := f.dyn.Resource(api.GVR).Delete(t.Context(), "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.events.reasons = nil
	want := []string{"patch ciliumloadbalancerippools lb", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("releasing wrote %q, want %q", got, want)
	}
	if blocks, record := f.pool(); !slices.Equal(blocks, []string{"192.0.2.0/24"}) || record != "" {
		t.Errorf("pool after release: %q, record %q; want the user's block alone", blocks, record)
	}
	ann := f.service()
	if ann[holdings.AnnotationIPs] != "192.0.2.7" || ann[holdings.AnnotationTarget] != "" || ann[holdings.AnnotationManagedIPs] != "" ||
		ann[holdings.AnnotationManagedTargetKeys] != "" || ann[dynamicprefix.AnnotationName] != "home" {
		t.Errorf("Service after release: %v; want the user's address, the user's name annotation, nothing of ours", ann)
	}
	slices.Sort(f.events.reasons)
	if want := []string{"PoolReleased lb", "ServiceReleased web"}; !slices.Equal(f.events.reasons, want) {
		t.Errorf("events %q, want %q", f.events.reasons, want)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("releasing again wrote %q", got)
	}
}

// An advertisement made for a deleted DynamicPrefix is deleted once: a pass
// before the cache shows the deletion does not send it again (it would be a
// 404 in the audit log).
func TestAnAdvertisementIsDeletedOnce(t *testing.T) {
	f := converged(t, generous)
	adv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
		"metadata": map[string]any{"name": "home-public", "resourceVersion": "7", "labels": map[string]any{
			backends.CiliumLabelManagedBy: backends.CiliumManagedBy, dynamicprefix.AnnotationName: "home"}},
	}}
	if _, err := f.dyn.Resource(bgpGVR).Create(t.Context(), adv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.bgp = backends.NewAdvertisementCache()
	if err := f.bgp.Add(adv); err != nil {
		t.Fatal(err)
	}
	if err := f.dyn.Resource(api.GVR).Delete(t.Context(), "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp() // the advertisement cache is left as it is: it has not caught up
	want := []string{"delete ciliumbgpadvertisements ", "patch ciliumloadbalancerippools lb", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("releasing wrote %q, want %q", got, want)
	}
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("a pass before the caches caught up wrote %q", got)
	}
}

// Back to transition mode simple: the HA annotations go, the pools stay.
func TestSwitchingToSimpleReleasesTheServices(t *testing.T) {
	f := converged(t, generous)
	f.edit(api.GVR, "home", `{"spec":{"transition":{"mode":"simple"}}}`)
	if got, want := f.sync(passHome), []string{"patch services web"}; !slices.Equal(got, want) {
		t.Fatalf("switching to simple wrote %q, want %q", got, want)
	}
	if ann := f.service(); ann[holdings.AnnotationIPs] != "192.0.2.7" || ann[holdings.AnnotationManagedIPs] != "" {
		t.Errorf("Service: %v", ann)
	}
	if blocks, _ := f.pool(); len(blocks) != 2 {
		t.Errorf("pool blocks %q: the pool still follows home", blocks)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again: %q", got)
	}
}

// A writer restarted with one DNS target key fewer releases the other, user's
// entries under it kept, in one patch; the pass after it, before the cache
// shows that patch, writes nothing (what it remembers writing reads as the
// cache will).
func TestADroppedTargetKeyIsReleasedInOnePatch(t *testing.T) {
	f := converged(t, generous)
	body := `{"metadata":{"annotations":{"` + holdings.AnnotationTargetAlpha + `":"legacy.example.org,2001:db8:a:0:ffff::1"}}}`
	if _, err := f.meta.Resource(holdings.ServiceGVR).Namespace("default").Patch(t.Context(), "web", "application/merge-patch+json", []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.ctl = NewController(Config{Budget: generous, TargetKeys: []string{holdings.AnnotationTarget}}, f, f.votes, f.dyn, f.meta, f.clock,
		slog.New(slog.NewTextHandler(io.Discard, nil)), f.events)
	if got, want := f.sync(passHome), []string{"patch services web"}; !slices.Equal(got, want) {
		t.Fatalf("releasing the alpha key wrote %q, want %q", got, want)
	}
	if got := f.service()[holdings.AnnotationTargetAlpha]; got != "legacy.example.org" {
		t.Errorf("alpha key after the release = %q, want the user's entry alone", got)
	}
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again before the cache caught up: %q", got)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again after: %q", got)
	}
}

// The change latency runs from the nodes' change the leader saw to the pass
// that wrote for it; a change that writes nothing is not counted, and the
// next one counts from its own time.
func TestTheChangeLatencyRunsFromTheNodesToTheWrites(t *testing.T) {
	f := converged(t, generous)
	count, sum := metricLatency.Count(), metricLatency.Sum()
	f.report(3, prefixB, prefixA)
	f.ctl.NodesChanged()
	f.clock.Step(250 * time.Millisecond)
	if got := f.sync(passHome); len(got) == 0 {
		t.Fatal("a prefix change wrote nothing")
	}
	if n, s := metricLatency.Count()-count, metricLatency.Sum()-sum; n != 1 || s != 0.25 {
		t.Errorf("counted %d latencies summing %gs, want one of 0.25s", n, s)
	}
	f.catchUp()

	f.ctl.NodesChanged() // nothing changed for home
	f.clock.Step(time.Second)
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("no change wrote %q", got)
	}
	f.report(3, prefixC, prefixB)
	f.ctl.NodesChanged()
	f.clock.Step(100 * time.Millisecond)
	f.sync(passHome)
	if n, s := metricLatency.Count()-count, metricLatency.Sum()-sum; n != 2 || math.Abs(s-0.35) > 1e-9 {
		t.Errorf("counted %d latencies summing %gs, want two summing 0.35s (the quiet second not counted)", n, s)
	}
}

// TestANewTermWritesNothingTheCachesHaveNotCaughtUpWith: leadership lost and
// won again (a renewal past its deadline on a slow API server) before the
// caches showed the last term's writes. Writing again then would be made
// against versions those writes replaced: a conflict for each, and the
// object written twice. The new term waits for the caches instead, and
// then finds nothing to change.
func TestANewTermWritesNothingTheCachesHaveNotCaughtUpWith(t *testing.T) {
	f := adopted(t, generous)
	f.ctl.write.Forget()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("a new term wrote %q again before its caches showed the last term's writes", got)
	}
	f.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("once the caches caught up, the new term wrote %q", got)
	}
}
