// service.go renders the addresses of Services that follow a DynamicPrefix
// in transition mode "ha": `lbipam.cilium.io/ips` gets the current and retained
// addresses (so connections on the old prefix keep working while it drains) and
// the external-dns target keys only the current one, once the load balancer
// publishes it in the Service's status (so a name never resolves to an address
// that does not answer yet).
// User entries are kept; ownership records say which entries, and under which
// target keys, are ours.

package render

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/renumber/renumber/internal/dynamicprefix"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/renumber/renumber/internal/writer/api"
)

// Annotations read and written on Services.
const (
	AnnotationSuffix  = "dynamic-prefix.io/suffix"
	AnnotationRange   = "dynamic-prefix.io/service-address-range"
	AnnotationSubnet  = "dynamic-prefix.io/service-subnet"
	AnnotationSkipDNS = "dynamic-prefix.io/skip-external-dns-update"
	// AnnotationSkipL2Nudge / AnnotationForceL2Nudge: "true" overrides, for one
	// Service, whether it gets the L2 announcer nudge (ServiceOptions.L2Nudge).
	AnnotationSkipL2Nudge  = "dynamic-prefix.io/skip-l2-nudge"
	AnnotationForceL2Nudge = "dynamic-prefix.io/force-l2-nudge"
	// AnnotationL2Nudged is the nudge: the managed addresses the load balancer
	// published when we last touched the Service for Cilium's L2 announcer.
	AnnotationIPs        = "lbipam.cilium.io/ips"
	AnnotationManagedIPs = "dynamic-prefix.io/managed-ips"
	// AnnotationProvider chooses the load balancer that gets the addresses:
	// cilium (the default: AnnotationIPs) or kube-vip (AnnotationKubeVIPIPs).
	AnnotationProvider = "dynamic-prefix.io/lb-provider"
	// AnnotationKubeVIPIPs is what the kube-vip cloud provider and kube-vip
	// read for the addresses a Service asks for.
	AnnotationKubeVIPIPs = "kube-vip.io/loadbalancerIPs"
	// AnnotationManagedIPsKey records the key the managed addresses were
	// written under when it is not AnnotationIPs (so a Service that never
	// left Cilium carries no such record, and upgrading costs no write).
	AnnotationManagedIPsKey = "dynamic-prefix.io/managed-ips-key"
	AnnotationManagedTarget = "dynamic-prefix.io/managed-targets"
	AnnotationL2Nudged      = "dynamic-prefix.io/l2-nudged"
	// AnnotationManagedTargetKeys records the target keys we wrote the
	// managed targets under. Absent with managed targets present: the alpha
	// key alone (what was written before keys could be chosen).
	AnnotationManagedTargetKeys = "dynamic-prefix.io/managed-target-keys"

	// AnnotationMapping asks for the Service's DNS target to be the address
	// its router maps its load-balancer address to (api.MappingNPTv6 or
	// api.MappingNetmap), from the prefix AnnotationMappingPrefix onto the
	// followed DynamicPrefix's (renumber additions). The Service's own
	// address is never written.
	AnnotationMapping       = "dynamic-prefix.io/mapping"
	AnnotationMappingPrefix = "dynamic-prefix.io/mapping-prefix"

	// AnnotationTarget is the key external-dns v0.22 and later read by default.
	AnnotationTarget = "external-dns.kubernetes.io/target"
	// AnnotationTargetAlpha is the key external-dns read before v0.22.
	AnnotationTargetAlpha = "external-dns.alpha.kubernetes.io/target"
)

// DefaultTargetKeys are the keys the target is written under unless told
// otherwise: both spellings, so a cluster keeps resolving across an
// external-dns upgrade.
var DefaultTargetKeys = []string{AnnotationTarget, AnnotationTargetAlpha}

// CheckTargetKeys refuses keys that are not annotation keys, repeat, or
// collide with an annotation renumber reads or owns.
func CheckTargetKeys(keys []string) error {
	var errs []error
	seen := map[string]bool{}
	for _, k := range keys {
		if problems := validation.IsQualifiedName(k); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("target key %q is not an annotation key: %s", k, strings.Join(problems, "; ")))
		}
		if seen[k] {
			errs = append(errs, fmt.Errorf("target key %q is listed twice", k))
		}
		seen[k] = true
		if slices.Contains(AddressKeys, k) || strings.HasPrefix(k, "dynamic-prefix.io/") {
			errs = append(errs, fmt.Errorf("target key %q is an annotation renumber reads or owns", k))
		}
	}
	return errors.Join(errs...)
}

// ServiceGVR is the Service resource.
var ServiceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// ServiceFollow is what a Service's annotations ask for.
type ServiceFollow struct {
	DynamicPrefix string
	Suffix        string
	Range         string
	Subnet        string
	Provider      string
	SkipDNS       bool
	SkipL2Nudge   bool
	ForceL2Nudge  bool
	// Mapping, MappingPrefix: the DNS target is the load-balancer address
	// mapped from MappingPrefix (AnnotationMapping).
	Mapping       string
	MappingPrefix string
}

// ServiceFollowOf reads a Service's annotations.
func ServiceFollowOf(ann map[string]string) ServiceFollow {
	serviceReads.Add(1)
	return ServiceFollow{
		DynamicPrefix: ann[dynamicprefix.AnnotationName],
		Suffix:        ann[AnnotationSuffix],
		Range:         ann[AnnotationRange],
		Subnet:        ann[AnnotationSubnet],
		Provider:      ann[AnnotationProvider],
		SkipDNS:       ann[AnnotationSkipDNS] == "true",
		SkipL2Nudge:   ann[AnnotationSkipL2Nudge] == "true",
		ForceL2Nudge:  ann[AnnotationForceL2Nudge] == "true",
		Mapping:       ann[AnnotationMapping],
		MappingPrefix: ann[AnnotationMappingPrefix],
	}
}

// serviceReads counts the Services ServiceFollowOf read.
var serviceReads atomic.Int64

// ServicesRead is how many Services ServiceFollowOf has read so far: a test
// and the writer's benchmark count the reads of a pass with it.
func ServicesRead() int64 { return serviceReads.Load() }

// AddressKeys are the annotations a load balancer reads a Service's addresses
// from: Cilium's, then kube-vip's.
var AddressKeys = []string{AnnotationIPs, AnnotationKubeVIPIPs}

// AddressKey is the annotation the Service's provider reads its addresses
// from. Errors wrap api.ErrInvalid.
func (f ServiceFollow) AddressKey() (string, error) {
	switch f.Provider {
	case "", "cilium":
		return AnnotationIPs, nil
	case "kube-vip":
		return AnnotationKubeVIPIPs, nil
	}
	return "", fmt.Errorf("%w: %s %q: want cilium or kube-vip", api.ErrInvalid, AnnotationProvider, f.Provider)
}

// ServiceAddress is the Service's address on prefix p: the static suffix spliced onto
// the prefix (with a service address range, the result must lie inside that
// range), or onto the named subnet. Errors wrap api.ErrInvalid.
func ServiceAddress(m api.Model, f ServiceFollow, p netip.Prefix) (netip.Addr, error) {
	if f.Suffix == "" {
		return netip.Addr{}, fmt.Errorf("%w: %s is required", api.ErrInvalid, AnnotationSuffix)
	}
	suffix, err := netip.ParseAddr(f.Suffix)
	if err != nil || !suffix.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: %s %q is not an IPv6 suffix", api.ErrInvalid, AnnotationSuffix, f.Suffix)
	}
	base := p
	switch {
	case f.Range != "" && f.Subnet != "":
		return netip.Addr{}, fmt.Errorf("%w: both %s and %s are set", api.ErrInvalid, AnnotationRange, AnnotationSubnet)
	case f.Range != "":
		first, last, err := m.Range(f.Range, p)
		if err != nil {
			return netip.Addr{}, err
		}
		a, err := api.Splice(m.Delegation(p), suffix) // ranges lie in the delegation
		if err != nil || a.Less(first) || last.Less(a) {
			return netip.Addr{}, fmt.Errorf("%w: suffix %s is outside address range %q", api.ErrInvalid, f.Suffix, f.Range)
		}
		return a, nil
	case f.Subnet != "":
		if base, err = m.Subnet(f.Subnet, p); err != nil {
			return netip.Addr{}, err
		}
	}
	a, err := api.Splice(base, suffix)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %w", api.ErrInvalid, err)
	}
	return a, nil
}

// Annotations are what a Service carries of ours; an empty list means the
// annotation is absent (an empty lbipam.cilium.io/ips would withdraw the
// Service's address, so none is ever written).
type Annotations struct {
	// IPs are the entries under each key of AddressKeys.
	IPs map[string][]string
	// ManagedIPs is the record of the addresses we own under IPsKey
	// (AnnotationIPs when "").
	ManagedIPs []string
	IPsKey     string
	// Targets are the entries under each target key: the keys asked for and
	// those the record names.
	Targets map[string][]string
	// ManagedTargets is the record of the target entries we own, under every
	// key of TargetKeys.
	ManagedTargets []string
	TargetKeys     []string
	// L2Nudged is the last nudge (AnnotationL2Nudged).
	L2Nudged []string
	// IPsRecorded, TargetsRecorded, KeysRecorded: the Service carries
	// AnnotationManagedIPs, AnnotationManagedTarget and
	// AnnotationManagedTargetKeys. Without the first two it was last written
	// before records existed (the existing operator's geometric rule then
	// says what it owns); without the third, by the existing operator or by
	// renumber before target keys could be chosen.
	IPsRecorded, TargetsRecorded, KeysRecorded bool
}

// Live reads a Service's annotations: the addresses, and the targets under
// every key of keys and of the record.
func Live(ann map[string]string, keys []string) Annotations {
	a := Annotations{
		IPs:            map[string][]string{},
		ManagedIPs:     Split(ann[AnnotationManagedIPs]),
		IPsKey:         ann[AnnotationManagedIPsKey],
		ManagedTargets: Split(ann[AnnotationManagedTarget]),
		TargetKeys:     targetKeysRecord(ann[AnnotationManagedTargetKeys]),
		L2Nudged:       Split(ann[AnnotationL2Nudged]),
		Targets:        map[string][]string{},
	}
	_, a.IPsRecorded = ann[AnnotationManagedIPs]
	_, a.TargetsRecorded = ann[AnnotationManagedTarget]
	_, a.KeysRecorded = ann[AnnotationManagedTargetKeys]
	if !a.KeysRecorded && len(a.ManagedTargets) > 0 {
		a.TargetKeys = keysHolding(ann, a.ManagedTargets)
	}
	for _, k := range AddressKeys {
		if v := Split(ann[k]); len(v) > 0 {
			a.IPs[k] = v
		}
	}
	for _, k := range slices.Concat(keys, a.TargetKeys) {
		if v := Split(ann[k]); len(v) > 0 {
			a.Targets[k] = v
		}
	}
	return a
}

// targetKeysRecord reads the keys record. Anyone who may edit the Service
// can write it: a key renumber could never have written there (not a valid
// target key, or repeated) is ignored, so a forged record cannot turn an
// address key or a record of ours into a target key.
func targetKeysRecord(v string) []string {
	var out []string
	for _, k := range Split(v) {
		if CheckTargetKeys(append(slices.Clone(out), k)) == nil {
			out = append(out, k)
		}
	}
	return out
}

// keysHolding are the target keys, of those the existing operator writes by
// default (both), that hold one of the managed targets: where a Service
// without our keys record has them. None: the alpha key, the one key written
// before keys could be chosen.
func keysHolding(ann map[string]string, managed []string) []string {
	var out []string
	for _, k := range DefaultTargetKeys {
		if slices.ContainsFunc(Split(ann[k]), func(e string) bool {
			return slices.ContainsFunc(managed, func(m string) bool { return Canonical(m) == Canonical(e) })
		}) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = []string{AnnotationTargetAlpha}
	}
	return out
}

// ours are the annotations renumber reads or owns on every Service; the
// alpha key is one too, for Services written before the keys record existed.
var ours = []string{dynamicprefix.AnnotationName, AnnotationSuffix, AnnotationRange, AnnotationSubnet, AnnotationSkipDNS,
	AnnotationSkipL2Nudge, AnnotationForceL2Nudge, AnnotationProvider, AnnotationIPs, AnnotationKubeVIPIPs,
	AnnotationManagedIPs, AnnotationManagedIPsKey, AnnotationManagedTarget, AnnotationManagedTargetKeys,
	AnnotationL2Nudged, AnnotationTargetAlpha, AnnotationMapping, AnnotationMappingPrefix}

// Keep returns the annotations of ann the Service cache keeps (nil if none):
// ours, the target keys asked for, and those its record names (so a key
// dropped from the list can be released).
func Keep(ann map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range slices.Concat(ours, keys, targetKeysRecord(ann[AnnotationManagedTargetKeys])) {
		if v, ok := ann[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// MaxKeptBytes bounds what the Service cache keeps of one Service's
// annotations (Keep). A Service holds a few addresses and targets; anyone who
// may edit it can write 256 KiB. Over the bound the Service is Oversized:
// renumber cannot write it without the whole value, so it leaves it alone.
const MaxKeptBytes = 16 << 10

// MaxEntries bounds the entries (comma-separated, empty ones counted) of
// each address, DNS-target and record annotation on a Service the writer
// writes: the admission policy renumber-writer-sizes refuses it more, so that
// the value policy's evaluation cannot be padded past its cost. The writer
// writes at most 11 addresses; the rest are the user's.
const MaxEntries = 64

// TooManyEntries returns an annotation of ann (as the cache keeps them) with
// more than MaxEntries entries.
func TooManyEntries(ann map[string]string) (string, bool) {
	for k, v := range ann {
		bounded := slices.Contains(AddressKeys, k) || strings.HasSuffix(k, "/target") ||
			k == AnnotationManagedIPs || k == AnnotationManagedTarget || k == AnnotationL2Nudged
		if bounded && strings.Count(v, ",") >= MaxEntries {
			return k, true
		}
	}
	return "", false
}

// oversized marks a Service over MaxKeptBytes in the cache. It is not a valid
// annotation key, so no Service in the API can carry it.
const oversized = "renumber oversized annotations"

// maxKeptIngress bounds the load-balancer addresses the cache keeps.
const maxKeptIngress = 64

// Slim is s as the writer's Service cache keeps it: its identity, the
// annotations Keep keeps (only which DynamicPrefix it follows, and the
// mark, when they total more than MaxKeptBytes) and the IPs of
// status.loadBalancer.ingress.
func Slim(s *corev1.Service, keys []string) *corev1.Service {
	out := &corev1.Service{}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = s.Name, s.Namespace, s.ResourceVersion, s.UID
	out.CreationTimestamp = s.CreationTimestamp // who asked first for an address (Conflict)
	out.Annotations = Keep(s.Annotations, keys)
	size := 0
	for k, v := range out.Annotations {
		size += len(k) + len(v)
	}
	if size > MaxKeptBytes {
		out.Annotations = map[string]string{oversized: strconv.Itoa(size)}
		if dp := s.Annotations[dynamicprefix.AnnotationName]; len(dp) <= validation.DNS1123SubdomainMaxLength {
			out.Annotations[dynamicprefix.AnnotationName] = dp
		}
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" && len(out.Status.LoadBalancer.Ingress) < maxKeptIngress {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in.IP})
		}
	}
	return out
}

// Oversized reports whether the cache kept only the mark of s's annotations
// (Slim), and their size in bytes.
func Oversized(s *corev1.Service) (int, bool) {
	v, ok := s.Annotations[oversized]
	n, _ := strconv.Atoi(v)
	return n, ok
}

// Ingress returns the IPs s's status.loadBalancer.ingress publishes, in the
// canonical form we write addresses in.
func Ingress(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}

// Owned reports whether the Service carries anything of ours (a record).
func (a Annotations) Owned() bool {
	return len(a.ManagedIPs) > 0 || a.IPsKey != "" || len(a.ManagedTargets) > 0 || len(a.TargetKeys) > 0 || len(a.L2Nudged) > 0
}

// Equal compares two renderings entry by entry, in canonical form and in any
// order (a load balancer and external-dns do not care about order), except
// that a's current address (the first of a.ManagedIPs) must lead ours in b:
// a prefix that becomes current again moves to the front.
func (a Annotations) Equal(b Annotations) bool {
	key := cmp.Or(a.IPsKey, AnnotationIPs)
	return Leads(b.IPs[key], a.ManagedIPs) && sameEntries(a.Targets, b.Targets) && sameEntries(a.IPs, b.IPs) &&
		SameSet(a.ManagedIPs, b.ManagedIPs) && a.IPsKey == b.IPsKey &&
		SameSet(a.ManagedTargets, b.ManagedTargets) && SameSet(a.TargetKeys, b.TargetKeys) &&
		SameSet(a.L2Nudged, b.L2Nudged)
}

// Applied is ann after the merge patch of annotations patch (a nil value
// removes a key): what the Service carries once the patch is made.
func Applied(ann map[string]string, patch map[string]any) map[string]string {
	out := make(map[string]string, len(ann)+len(patch))
	for k, v := range ann {
		out[k] = v
	}
	for k, v := range patch {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			delete(out, k)
		}
	}
	return out
}

// Patch is the annotations map of a merge patch making a Service carry a
// (null removes one), given what it carries now: every annotation of ours
// either rendering names, nothing else.
func (a Annotations) Patch(live Annotations) map[string]any {
	val := func(v []string) any {
		if len(v) == 0 {
			return nil
		}
		return strings.Join(v, ",")
	}
	out := map[string]any{
		AnnotationManagedIPs: val(a.ManagedIPs), AnnotationManagedIPsKey: nil,
		AnnotationManagedTarget: val(a.ManagedTargets), AnnotationManagedTargetKeys: val(a.TargetKeys),
		AnnotationL2Nudged: val(a.L2Nudged),
	}
	if a.IPsKey != "" {
		out[AnnotationManagedIPsKey] = a.IPsKey
	}
	for _, m := range []map[string][]string{live.IPs, live.Targets} {
		for k := range m {
			out[k] = nil
		}
	}
	for _, m := range []map[string][]string{a.IPs, a.Targets} {
		for k, v := range m {
			out[k] = val(v)
		}
	}
	return out
}

// sameEntries compares entries under each key, as sets (a key without
// entries is absent).
func sameEntries(a, b map[string][]string) bool {
	for k, v := range a {
		if !SameSet(v, b[k]) {
			return false
		}
	}
	for k, v := range b {
		if !SameSet(v, a[k]) {
			return false
		}
	}
	return true
}

// ServiceOptions are the writer's settings for every HA Service.
type ServiceOptions struct {
	// TargetKeys: the target goes under every key, in order.
	TargetKeys []string
	// Managed are the prefixes whose addresses a Service without records
	// is taken to hold as ours (decide.Decision.Managed: the existing
	// operator's geometric rule).
	Managed []netip.Prefix
	// L2Nudge: the running Cilium's L2 announcer misses an address added to
	// an existing Service (before v1.20.1, cilium/cilium PR 47579), so each
	// Service whose load balancer has published a new address of ours is
	// touched once more (Nudged).
	L2Nudge bool
}

// Service merges the managed addresses for the pooled prefixes (current first)
// with what the Service carries now. ingress is what the Service's
// status.loadBalancer.ingress publishes: the target moves to the current
// address only once it is published there (Held), and the nudge follows it.
func Service(m api.Model, f ServiceFollow, pooled []netip.Prefix, live Annotations, ingress []string, o ServiceOptions) (Annotations, error) {
	if f.Mapping != "" {
		return renderMapped(m, f, pooled, live, ingress, o)
	}
	key, err := f.AddressKey()
	if err != nil {
		return Annotations{}, err
	}
	var addrs []string
	for _, p := range pooled {
		a, err := ServiceAddress(m, f, p)
		if err != nil {
			return Annotations{}, err
		}
		if !slices.Contains(addrs, a.String()) {
			addrs = append(addrs, a.String())
		}
	}
	live = geometric(live, o.Managed)
	var out Annotations
	out.IPs, out.ManagedIPs = addresses(live, key, addrs)
	if key != AnnotationIPs && len(out.ManagedIPs) > 0 {
		out.IPsKey = key
	}
	var current []string
	if len(addrs) > 0 && !f.SkipDNS {
		current = addrs[:1]
		if held := Held(live, addrs, ingress); held != nil {
			current = held
		}
	}
	out.Targets, out.ManagedTargets, out.TargetKeys = targets(live, o.TargetKeys, current)
	out.L2Nudged = live.L2Nudged
	if f.ForceL2Nudge || (o.L2Nudge && !f.SkipL2Nudge && key == AnnotationIPs) {
		out.L2Nudged = Nudged(live.L2Nudged, out.ManagedIPs, ingress)
	}
	return out.recorded(), nil
}

// Mapping is one address the load balancer publishes and the address the
// router maps it to, from prefix From onto To.
type Mapping struct {
	Inside, Outside netip.Addr
	From, To        netip.Prefix
}

// Mapped returns what the router maps each address of ingress inside the
// Service's mapping prefix to, under current (or its delegation, when that
// is the mapping prefix's length). Errors wrap api.ErrInvalid.
func Mapped(m api.Model, f ServiceFollow, current netip.Prefix, ingress []string) ([]Mapping, error) {
	inside, err := f.mappingPrefix()
	if err != nil {
		return nil, err
	}
	outside := current
	if d := m.Delegation(current); d.Bits() == inside.Bits() {
		outside = d
	}
	if outside.Bits() != inside.Bits() {
		return nil, fmt.Errorf("%w: %s %s is a /%d; the router maps it onto the followed prefix %s (or its delegation), a /%d",
			api.ErrInvalid, AnnotationMappingPrefix, inside, inside.Bits(), outside, outside.Bits())
	}
	var out []Mapping
	for _, in := range ingress {
		a, err := netip.ParseAddr(in)
		if err != nil || !inside.Contains(a) {
			continue
		}
		t, err := api.Map(f.Mapping, a, inside, outside)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", api.ErrInvalid, err)
		}
		out = append(out, Mapping{Inside: a, Outside: t, From: inside, To: outside})
	}
	return out, nil
}

// mappingPrefix reads AnnotationMappingPrefix.
func (f ServiceFollow) mappingPrefix() (netip.Prefix, error) {
	inside, err := netip.ParsePrefix(f.MappingPrefix)
	if err != nil || !inside.Addr().Is6() || inside.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%w: %s %q is not an IPv6 prefix", api.ErrInvalid, AnnotationMappingPrefix, f.MappingPrefix)
	}
	return inside.Masked(), nil
}

// renderMapped is Service for one whose address stays (a ULA
// its router maps onto the followed prefix): the DNS target is each address
// the load balancer publishes inside the mapping prefix, mapped onto the
// current prefix - or onto its delegation, when that is the mapping
// prefix's length. While it publishes none, the target stays as it is (it
// is never withdrawn for a load balancer's restart). Addresses of ours from
// an earlier mode are released; the user's entries stay everywhere.
func renderMapped(m api.Model, f ServiceFollow, pooled []netip.Prefix, live Annotations, ingress []string, o ServiceOptions) (Annotations, error) {
	if f.Mapping != api.MappingNPTv6 && f.Mapping != api.MappingNetmap {
		return Annotations{}, fmt.Errorf("%w: %s %q: want %s or %s", api.ErrInvalid, AnnotationMapping, f.Mapping, api.MappingNPTv6, api.MappingNetmap)
	}
	if _, err := f.mappingPrefix(); err != nil {
		return Annotations{}, err
	}
	var current []string
	if len(pooled) > 0 && !f.SkipDNS {
		mapped, err := Mapped(m, f, pooled[0], ingress)
		if err != nil {
			return Annotations{}, err
		}
		for _, mp := range mapped {
			if !slices.Contains(current, mp.Outside.String()) {
				current = append(current, mp.Outside.String())
			}
		}
		if len(current) == 0 {
			current = live.ManagedTargets // nothing published yet: the target stays
		}
	}
	var out Annotations
	out.IPs, _ = addresses(live, "", nil)
	out.Targets, out.ManagedTargets, out.TargetKeys = targets(live, o.TargetKeys, current)
	out.L2Nudged = live.L2Nudged
	return out.recorded(), nil
}

// recorded sets which records the Service carries once a is written (Patch
// writes a record that has entries and removes one that has none).
func (a Annotations) recorded() Annotations {
	a.IPsRecorded, a.TargetsRecorded, a.KeysRecorded = len(a.ManagedIPs) > 0, len(a.ManagedTargets) > 0, len(a.TargetKeys) > 0
	return a
}

// geometric applies the existing operator's rule to what a Service without
// records holds: its addresses and targets inside managed are its own.
// A Service carrying any record was written by a version that writes them,
// so there an absent record owns nothing.
func geometric(live Annotations, managed []netip.Prefix) Annotations {
	if live.IPsRecorded || live.TargetsRecorded || live.KeysRecorded || live.Owned() {
		return live
	}
	live.ManagedIPs = Geometric(live.IPs[AnnotationIPs], managed)
	live.ManagedTargets = Geometric(live.Targets[AnnotationTargetAlpha], managed)
	if len(live.ManagedTargets) > 0 {
		live.TargetKeys = []string{AnnotationTargetAlpha}
	}
	return live
}

// addresses puts addrs under key, and takes ours out of the other address
// keys (a Service that changed provider): the user's entries stay everywhere.
func addresses(live Annotations, key string, addrs []string) (map[string][]string, []string) {
	was := live.IPsKey
	if was == "" {
		was = AnnotationIPs
	}
	out := map[string][]string{}
	var record []string
	for _, k := range AddressKeys {
		var owned, want []string
		if k == was {
			owned = live.ManagedIPs
		}
		if k == key {
			want = addrs
		}
		entries, rec := Merge(live.IPs[k], owned, want)
		if len(entries) > 0 {
			out[k] = entries
		}
		if k == key {
			record = rec
		}
	}
	return out, record
}

// Nudged returns the nudge record after the load balancer published ingress:
// when it publishes an address of ours the last nudge did not cover, a new
// record (the managed addresses it publishes) - the one write Cilium's L2
// announcer needs to see the address; otherwise the last record, so a
// published address going away (a drain ending) costs nothing.
func Nudged(last, managed, ingress []string) []string {
	var published []string
	for _, a := range managed {
		if slices.Contains(ingress, a) {
			published = append(published, a)
		}
	}
	for _, a := range published {
		if !slices.Contains(last, a) {
			return published
		}
	}
	return last
}

// Held returns the targets DNS stays on while the load balancer has not yet
// published the current address (addrs[0]): those we wrote before that are
// still managed addresses and still published. nil when the target may move:
// the current address is published, the Service publishes no ingress at all
// (nothing to wait for), or no previous target of ours still answers.
func Held(live Annotations, addrs, ingress []string) []string {
	if len(ingress) == 0 || slices.Contains(ingress, addrs[0]) {
		return nil
	}
	var held []string
	for _, t := range live.ManagedTargets {
		if slices.Contains(addrs, t) && slices.Contains(ingress, t) {
			held = append(held, t)
		}
	}
	return held
}

// targets writes current under every key of keys and releases the keys the
// record names that keys no longer does. The record is what we own under
// every key: an entry the user also lists under one key is the user's under
// all (a user entry is never removed; the price, in that corner, is an entry
// of ours left behind).
func targets(live Annotations, keys, current []string) (map[string][]string, []string, []string) {
	out := map[string][]string{}
	var record []string
	for i, k := range keys {
		var owned []string
		if slices.Contains(live.TargetKeys, k) {
			owned = live.ManagedTargets
		}
		entries, rec := Merge(live.Targets[k], owned, current)
		if len(entries) > 0 {
			out[k] = entries
		}
		if i == 0 {
			record = rec
		} else {
			record = slices.DeleteFunc(record, func(e string) bool { return !slices.Contains(rec, e) })
		}
	}
	for _, k := range live.TargetKeys {
		if !slices.Contains(keys, k) {
			if entries, _ := Merge(live.Targets[k], live.ManagedTargets, nil); len(entries) > 0 {
				out[k] = entries
			}
		}
	}
	if len(record) == 0 {
		return out, nil, nil
	}
	return out, record, slices.Clone(keys)
}

// ReleaseService removes our entries and records, keeping the user's.
func ReleaseService(live Annotations) Annotations {
	var out Annotations
	out.IPs, _ = addresses(live, "", nil)
	out.Targets, out.ManagedTargets, out.TargetKeys = targets(live, nil, nil)
	return out.recorded()
}

// Split reads a comma-separated annotation value, entries verbatim.
func Split(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
