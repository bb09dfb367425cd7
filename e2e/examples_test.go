package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/tools/world"
)

// example is what one file of manifests/examples needs and promises.
type example struct {
	// setup installs what the file says it needs (a backend's CRDs).
	setup func(t *testing.T, w *world.World)
	// writer: the writer flags (chart values) the file asks for.
	writer []string
	// delegated: the prefix comes from the router's DHCPv6 server, not RAs.
	delegated bool
	// holds reports whether the objects the file promises hold cur (and
	// draining, the replaced prefix, when not invalid).
	holds func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string)
	// answers is what DNS answers for the names the file publishes while the
	// router advertises cur: "name TYPE" -> the records' data
	// (TestEveryExampleNameAnswersOnEveryClaimedExternalDNS).
	answers func(t *testing.T, cur netip.Prefix) map[string][]string
	// sources are the external-dns sources besides service that publish
	// the file's names (gateway-httproute for an HTTPRoute's hostnames).
	sources []string
	// dnsSetup starts, after setup, what the file's names need before
	// external-dns publishes them (a Gateway controller that accepts its
	// routes); it skips the test when that is not built here.
	dnsSetup func(t *testing.T, w *world.World)
}

// lbRange is the examples' address range lb (::f000:0:0:0 to the end) on p.
func lbRange(t *testing.T, p netip.Prefix) string {
	return on(t, p, "::f000:0:0:0") + "-" + on(t, p, "::ffff:ffff:ffff:ffff")
}

// nth is the n-th subnet of length bits inside p (n < 2^32).
func nth(p netip.Prefix, n uint64, bits int) netip.Prefix {
	b := p.Masked().Addr().As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	if shift := 128 - bits; shift >= 64 {
		hi += n << (shift - 64)
	} else {
		add := n << shift
		if lo+add < lo {
			hi++
		}
		lo += add
		if shift > 32 {
			hi += n >> (64 - shift)
		}
	}
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), bits)
}

// both is cur, then draining when there is one, each through f.
func both(cur, draining netip.Prefix, f func(netip.Prefix) string) []string {
	out := []string{f(cur)}
	if draining.IsValid() {
		out = append(out, f(draining))
	}
	return out
}

func annotationsOf(t *testing.T, w *world.World, ns, name string) map[string]string {
	t.Helper()
	s, err := w.API.Client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Annotations
}

// nptv6Target is nptv6.yaml's ULA mapped onto the /48 the advertised /64
// cur is part of.
func nptv6Target(t *testing.T, cur netip.Prefix) string {
	target, err := model.Map(model.MappingNPTv6, netip.MustParseAddr("fd01:203:405:1::1234"),
		netip.MustParsePrefix("fd01:203:405::/48"), netip.PrefixFrom(cur.Addr(), 48).Masked())
	if err != nil {
		t.Fatal(err)
	}
	return target.String()
}

var examples = map[string]example{
	"home.yaml": {holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
		want := append([]string{"192.0.2.0/24"}, both(cur, draining, func(p netip.Prefix) string { return lbRange(t, p) })...)
		got := blocks(t, w, "lb")
		return slices.Equal(got, want), fmt.Sprintf("blocks %q, want %q", got, want)
	}},
	"cilium-ha-services.yaml": {holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
		wantBlocks := append([]string{"192.0.2.0/24"}, both(cur, draining, func(p netip.Prefix) string { return lbRange(t, p) })...)
		ann := annotationsOf(t, w, "default", "web")
		addr := func(p netip.Prefix) string { return on(t, p, "::ffff:0:0:1") }
		ips := strings.Split(ann["lbipam.cilium.io/ips"], ",")
		dns, read := publishes(ann, map[string]string{"hostname": "web.example.org", "target": addr(cur)})
		ok := slices.Equal(blocks(t, w, "lb"), wantBlocks) && slices.Equal(ips, both(cur, draining, addr)) && dns
		return ok, fmt.Sprintf("blocks %q ips %q external-dns reads %s", blocks(t, w, "lb"), ips, read)
	}, answers: func(t *testing.T, cur netip.Prefix) map[string][]string {
		return map[string][]string{"web.example.org AAAA": {on(t, cur, "::ffff:0:0:1")}}
	}},
	"metallb.yaml": {
		setup: func(t *testing.T, w *world.World) {
			if err := w.API.InstallMetalLB(t.Context()); err != nil {
				t.Fatal(err)
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}
			if _, err := w.API.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
			u, err := w.API.Dynamic.Resource(addressPoolGVR).Namespace("metallb-system").Get(t.Context(), "home", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "addresses")
			want := append([]string{"192.0.2.10-192.0.2.20"}, both(cur, draining, func(p netip.Prefix) string { return lbRange(t, p) })...)
			return slices.Equal(got, want), fmt.Sprintf("addresses %q, want %q", got, want)
		},
	},
	"calico.yaml": {
		setup: func(t *testing.T, w *world.World) {
			if err := w.API.InstallCalico(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
			pods := func(p netip.Prefix) string { return nth(p, 1, 112).String() }
			want := map[string]string{"home-v6": pods(cur)}
			if draining.IsValid() {
				want[backends.CalicoSiblingName("home-v6", pods(draining))] = pods(draining) + ", disabled"
			}
			got := ippools(t, w)
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("pools %v, want %v", got, want)
		},
	},
	"kube-vip.yaml": {
		setup: func(t *testing.T, w *world.World) {
			repo, err := world.RepoRoot()
			if err != nil {
				t.Fatal(err)
			}
			if err := w.API.Apply(t.Context(), filepath.Join(repo, "manifests", "kube-vip", "rbac.yaml")); err != nil {
				t.Fatal(err)
			}
		},
		writer: []string{"--kube-vip-configmap", backends.DefaultKubeVIPConfigMap},
		holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
			cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "kubevip", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			want := strings.Join(append([]string{"192.0.2.100-192.0.2.110"}, both(cur, draining, func(p netip.Prefix) string { return lbRange(t, p) })...), ",")
			ips := annotationsOf(t, w, "default", "vip")["kube-vip.io/loadbalancerIPs"]
			wantIPs := strings.Join(both(cur, draining, func(p netip.Prefix) string { return on(t, p, "::ffff:0:0:2") }), ",")
			return cm.Data["range-global"] == want && ips == wantIPs, fmt.Sprintf("range-global %q ips %q", cm.Data["range-global"], ips)
		},
	},
	"bgp.yaml": {holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
		public := func(p netip.Prefix) string { return nth(p, 1, 120).String() }
		got := blocks(t, w, "public")
		u, err := w.API.Dynamic.Resource(advertGVR).Get(t.Context(), "home-public", metav1.GetOptions{})
		if err != nil {
			return false, fmt.Sprintf("blocks %q, no advertisement: %v", got, err)
		}
		ads, _, _ := unstructured.NestedSlice(u.Object, "spec", "advertisements")
		return slices.Equal(got, both(cur, draining, public)) && len(ads) == 1 && u.GetLabels()["advertise"] == "bgp",
			fmt.Sprintf("blocks %q advertisements %v", got, ads)
	}},
	"delegation.yaml": {holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
		// The /64 number 3 of the /56 the advertised /64 is part of.
		third := func(p netip.Prefix) string { return nth(netip.PrefixFrom(p.Addr(), 56).Masked(), 3, 64).String() }
		got := blocks(t, w, "services")
		_, err := w.API.Dynamic.Resource(advertGVR).Get(t.Context(), "home-services", metav1.GetOptions{})
		return slices.Equal(got, both(cur, draining, third)) && err == nil, fmt.Sprintf("blocks %q, advertisement: %v", got, err)
	}},
	"nptv6.yaml": {
		setup: func(t *testing.T, w *world.World) {
			if _, err := w.StartLBIPAM(); err != nil {
				t.Fatal(err)
			}
		},
		holds: func(t *testing.T, w *world.World, cur, _ netip.Prefix) (bool, string) {
			ann := annotationsOf(t, w, "default", "web")
			dns, _ := publishes(ann, map[string]string{"hostname": "web.example.org", "target": "192.0.2.10," + nptv6Target(t, cur)})
			return dns && ann["lbipam.cilium.io/ips"] == "fd01:203:405:1::1234", fmt.Sprintf("annotations %v", ann)
		},
		answers: func(t *testing.T, cur netip.Prefix) map[string][]string {
			return map[string][]string{"web.example.org AAAA": {nptv6Target(t, cur)}, "web.example.org A": {"192.0.2.10"}}
		},
	},
	"dhcpv6-pd.yaml": {
		delegated: true,
		holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
			got := blocks(t, w, "lb")
			want := []string{"192.0.2.0/24", nth(cur, 1, 64).String()}
			return len(got) >= 2 && slices.Equal(got[:2], want), fmt.Sprintf("blocks %q, want %q first", got, want)
		},
	},
	"calico-network-sets.yaml": {
		setup: func(t *testing.T, w *world.World) {
			if err := w.API.InstallCalico(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
			lan, svc := nets(t, w, networkSetGVR, "default", "home-lan"), nets(t, w, globalNetworkSetGVR, "", "home-services")
			wantLAN := append([]string{"192.168.1.0/24"}, both(cur, draining, netip.Prefix.String)...)
			wantSvc := append([]string{"192.168.2.0/24"}, both(cur, draining, func(p netip.Prefix) string { return nth(p, 1, 112).String() })...)
			return slices.Equal(lan, wantLAN) && slices.Equal(svc, wantSvc), fmt.Sprintf("home-lan %q, home-services %q", lan, svc)
		},
	},
	"network-policy.yaml": {holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
		var blocks []string
		for _, p := range both(cur, draining, netip.Prefix.String) {
			blocks = append(blocks, p+" except "+strings.TrimSuffix(p, "::/64")+"::ff00/120")
		}
		got := policyPeers(getIn(t, w, networkPolicyGVR, "default", "home-lan"))
		want := "ingress[0]: 192.168.1.0/24, " + strings.Join(blocks, ", ") + " (1 ports)"
		return got == want, fmt.Sprintf("%s, want %s", got, want)
	}},
	"gateway.yaml": {
		setup: func(t *testing.T, w *world.World) {
			if err := w.API.InstallGatewayAPI(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
		holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
			addr := func(p netip.Prefix) string { return on(t, p, "::ffff:0:0:3") }
			ours := both(cur, draining, addr)
			want := map[string]any{"addresses": "IPAddress 192.0.2.10, IPAddress " + strings.Join(ours, ", IPAddress "),
				"infrastructure": map[string]string{"lbipam.cilium.io/ips": "192.0.2.10," + strings.Join(ours, ",")}, "listeners": 1,
				"target": "192.0.2.10," + addr(cur), "alpha": "192.0.2.10," + addr(cur), "record": strings.Join(ours, ",")}
			got := gatewayHolds(t, w, "default", "web")
			wantBlocks := append([]string{"192.0.2.0/24"}, both(cur, draining, func(p netip.Prefix) string { return lbRange(t, p) })...)
			return fmt.Sprint(got) == fmt.Sprint(want) && slices.Equal(blocks(t, w, "lb"), wantBlocks),
				fmt.Sprintf("Gateway %v, want %v; blocks %q", got, want, blocks(t, w, "lb"))
		},
		answers: func(t *testing.T, cur netip.Prefix) map[string][]string {
			return map[string][]string{"web.example.org AAAA": {on(t, cur, "::ffff:0:0:3")}, "web.example.org A": {"192.0.2.10"}}
		},
		sources:  []string{"gateway-httproute"},
		dnsSetup: startCiliumGateway,
	},
	"cidr-groups.yaml": {holds: func(t *testing.T, w *world.World, cur, draining netip.Prefix) (bool, string) {
		got := cidrs(t, w, "home-lan")
		want := append([]string{"192.168.1.0/24"}, both(cur, draining, netip.Prefix.String)...)
		return slices.Equal(got, want), fmt.Sprintf("externalCIDRs %q, want %q", got, want)
	}},
}

// TestEveryExampleRenumbers: every file of manifests/examples, applied as it
// is in a world of its own (with what its comments say it needs installed),
// brings the objects it promises to the router's prefix, and through a
// renumbering (the replaced prefix draining where the example keeps it).
func TestEveryExampleRenumbers(t *testing.T) {
	t.Parallel() // its subtests start worlds: among the other world tests, not before them
	files := exampleFiles(t)
	for _, file := range files {
		name := filepath.Base(file)
		ex, ok := examples[name]
		if !ok {
			t.Errorf("manifests/examples/%s has no test here", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 1)
			ctx := t.Context()
			if ex.setup != nil {
				ex.setup(t, w)
			}
			first := world.Delegation{Pool: netip.MustParsePrefix("2001:db8:a00::/52"), Length: 56, Valid: 120 * time.Second, Preferred: 60 * time.Second}
			if ex.delegated {
				if err := w.Net.Router.DelegatePrefixes(ctx, first); err != nil {
					t.Fatal(err)
				}
			}
			advertise(t, w, prefixA)
			if err := w.API.Apply(ctx, file); err != nil {
				t.Fatalf("the API server refuses the example: %v", err)
			}
			startAgent(t, w, "node1")
			startWriter(t, w, "writer-a", ex.writer...)

			if ex.delegated {
				cur := delegatedCurrent(t, w, first.Pool)
				eventuallyWithin(t, 2*time.Minute, "the objects follow "+cur.String(), func() (bool, string) { return ex.holds(t, w, cur, netip.Prefix{}) })
				second := first
				second.Pool = netip.MustParsePrefix("2001:db8:b00::/52")
				if err := w.Net.Router.DelegatePrefixes(ctx, second); err != nil {
					t.Fatal(err)
				}
				next := delegatedCurrent(t, w, second.Pool)
				eventuallyWithin(t, 2*time.Minute, "the objects follow "+next.String(), func() (bool, string) { return ex.holds(t, w, next, netip.Prefix{}) })
				return
			}
			eventually(t, "the objects follow A", func() (bool, string) { return ex.holds(t, w, prefixA, netip.Prefix{}) })
			advertise(t, w, prefixB, prefixA)
			eventually(t, "the objects follow B, A draining", func() (bool, string) { return ex.holds(t, w, prefixB, prefixA) })
		})
	}
}

// exampleFiles are the files of manifests/examples.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(repo, "manifests", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return files
}

// delegatedCurrent waits for the DynamicPrefix home to follow a delegation
// from pool, and returns it.
func delegatedCurrent(t *testing.T, w *world.World, pool netip.Prefix) netip.Prefix {
	t.Helper()
	var cur netip.Prefix
	eventuallyWithin(t, 2*time.Minute, "a delegation from "+pool.String(), func() (bool, string) {
		st := dpStatus(t, w, "home")
		p, err := netip.ParsePrefix(st.CurrentPrefix)
		if err != nil || !pool.Contains(p.Addr()) {
			return false, st.CurrentPrefix
		}
		cur = p
		return true, ""
	})
	return cur
}

// TestTheShadowExampleInstallsBesideTheOperator: manifests/examples/shadow's
// values, installed with `helm install` as they are beside the existing
// operator's release (which installed the CRD), run no writer and a shadow
// under the read-only identity, and leave the CRD to that release. With the agent and the shadow running
// as the release binds them, next to a DynamicPrefix and a pool as the
// existing operator's users have them, the shadow plans the pool's entries
// for the advertised prefix and nothing of renumber's writes a thing but the
// agent's digest on its Node (audit log).
func TestTheShadowExampleInstallsBesideTheOperator(t *testing.T) {
	_, repo := helmBin(t)
	w := bareWorldWith(t, 1)
	ctx := t.Context()
	if err := w.API.InstallCiliumCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := helmIn(t, w, "install", "dpo", filepath.Join(repo, "e2e", "testdata", "dynamic-prefix-operator"),
		"-n", "dpo-system", "--create-namespace"); err != nil {
		t.Fatalf("installing the existing operator's chart: %v\n%s", err, out)
	}
	crdBefore := get(t, w, crdGVR, crdName)
	if out, err := installRenumber(t, w, filepath.Join(repo, "charts", "renumber"), "-f", filepath.Join(repo, "manifests", "examples", "shadow", "values.yaml")); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	manifest, err := helmIn(t, w, "get", "manifest", "renumber", "-n", world.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(manifest))
	if _, ok := objs["CustomResourceDefinition /"+crdName]; ok {
		t.Errorf("the shadow's release renders the CRD: the existing operator's is taken")
	}
	if crd := get(t, w, crdGVR, crdName); crd.GetGeneration() != crdBefore.GetGeneration() || crd.GetAnnotations()["meta.helm.sh/release-name"] == "renumber" {
		t.Errorf("the shadow's install took the existing operator's CRD: generation %d -> %d, annotations %v", crdBefore.GetGeneration(), crd.GetGeneration(), crd.GetAnnotations())
	}
	if r, _, _ := unstructured.NestedInt64(objs["Deployment "+world.Namespace+"/renumber-writer"], "spec", "replicas"); r != 0 {
		t.Errorf("the writer runs %d replicas, want none", r)
	}
	minimalDP(t, w, "home")
	createPool(t, w)
	m := mark(t, w)
	agent, shadow := objs["DaemonSet "+world.Namespace+"/renumber-agent"], objs["Deployment "+world.Namespace+"/renumber-shadow"]
	if _, err := w.StartAgentAs(ctx, podServiceAccount(agent), filepath.Join(binaries(t), "agent"), "node1", localArgs(t, agent)...); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	if _, err := w.StartWriterAs(ctx, podServiceAccount(shadow), filepath.Join(binaries(t), "writer"), "shadow-0",
		append(localArgs(t, shadow), "--metrics-addr", addr)...); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	eventually(t, "the shadow plans the pool's entries for A", func() (bool, string) {
		cs, err := planOf(addr)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range cs {
			if c.Object == "ciliumloadbalancerippools/lb" && c.Field == "spec entries" && c.To == "192.0.2.0/24,"+prefixA.String() {
				return true, ""
			}
		}
		return false, fmt.Sprint(cs)
	})
	onlyTheAgentWrote(t, w, m)
	if got := blocks(t, w, "lb"); !slices.Equal(got, []string{"192.0.2.0/24"}) {
		t.Errorf("pool lb holds %q: written in shadow mode", got)
	}
}

// onlyTheAgentWrote checks, once writes settled, that nothing of renumber's
// wrote since m but the agent's digest on its Node: shadow mode.
func onlyTheAgentWrote(t *testing.T, w *world.World, m world.Mark) {
	t.Helper()
	settleWrites()
	ws, err := w.API.WritesSince(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	for _, wr := range ws {
		if strings.HasPrefix(wr.User, "system:serviceaccount:"+world.Namespace+":") && !(wr.User == agentUser && wr.Resource == "nodes") {
			t.Errorf("a write in shadow mode: %s", wr)
		}
	}
}
