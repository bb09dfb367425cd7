package backends

import (
	"math/big"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func parent() *IPPool {
	return read(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6"},
		"spec": map[string]any{"cidr": "2001:db8:1:100::/64", "natOutgoing": false, "blockSize": int64(122),
			"nodeSelector": "all()", "vxlanMode": "Never"},
	}})
}

// read is u as the IPPool cache holds it.
func read(u *unstructured.Unstructured) *IPPool {
	p, _ := ReadIPPool(u)
	return p.(*IPPool)
}

// The current entry goes into the annotated pool; each draining one into a
// disabled copy of its settings, named by its CIDR.
func TestRender(t *testing.T) {
	p := RenderCalico(parent(), "home", []string{"2001:db8:2:200::/64", "2001:db8:1:100::/64"})
	if p.CIDR != "2001:db8:2:200::/64" || len(p.Siblings) != 1 {
		t.Fatalf("plan %+v", p)
	}
	s := p.Siblings[0]
	if s.Name != "home-v6-2001-db8-1-100-64" || s.Spec["cidr"] != "2001:db8:1:100::/64" || s.Spec["disabled"] != true ||
		s.Spec["blockSize"] != int64(122) || s.Spec["nodeSelector"] != "all()" {
		t.Errorf("sibling %+v", s)
	}
	if s.Labels[LabelSiblingOf] != "home-v6" || s.Labels["dynamic-prefix.io/name"] != "home" || s.Labels[CalicoLabelManagedBy] != CalicoManagedBy {
		t.Errorf("labels %v", s.Labels)
	}
	// The same CIDR coming back finds the same name: never a second pool.
	if again := RenderCalico(parent(), "home", []string{"2001:db8:3:300::/64", "2001:db8:1:100::/64"}); again.Siblings[0].Name != s.Name {
		t.Errorf("names differ: %s, %s", again.Siblings[0].Name, s.Name)
	}
	live := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"cidr": "2001:db8:1:100::/64", "disabled": true, "natOutgoing": false, "blockSize": float64(122),
		"nodeSelector": "all()", "vxlanMode": "Never"}}}
	live.SetLabels(s.Labels)
	if !SameCalico(read(live), s) {
		t.Error("a sibling as rendered is not Same")
	}
	if RenderCalico(parent(), "home", nil).CIDR != "" {
		t.Error("no entries, yet a CIDR")
	}
}

// A sibling never lies over the current entry, the annotated pool's: Felix
// would apply its settings (natOutgoing, encapsulation) to the current
// prefix's pods too. A draining entry around the current one (DHCPv6-PD: a
// /56 replaced by a /60 of it) keeps a sibling for each part of it outside
// the current entry; one inside the current entry needs none - the
// annotated pool holds its addresses.
func TestRenderNested(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []string
		want    []string
	}{
		{"a draining /56 around the current /60", []string{"2001:db8:1:10::/60", "2001:db8:1::/56"},
			[]string{"2001:db8:1:80::/57", "2001:db8:1:40::/58", "2001:db8:1:20::/59", "2001:db8:1::/60"}},
		{"a draining /64 inside the current /60", []string{"2001:db8:1:10::/60", "2001:db8:1:11::/64"}, nil},
		{"the current /64 at the end of a draining /62", []string{"2001:db8:1:13::/64", "2001:db8:1:10::/62"},
			[]string{"2001:db8:1:10::/63", "2001:db8:1:12::/64"}},
		{"two draining entries that share a part", []string{"2001:db8:1:10::/60", "2001:db8:1::/56", "2001:db8:1::/60"},
			[]string{"2001:db8:1:80::/57", "2001:db8:1:40::/58", "2001:db8:1:20::/59", "2001:db8:1::/60"}},
		{"beside it, the whole entry", []string{"2001:db8:1:10::/60", "2001:db8:2::/56"}, []string{"2001:db8:2::/56"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, s := range RenderCalico(parent(), "home", c.entries).Siblings {
				got = append(got, s.Spec["cidr"].(string))
				if s.Name != CalicoSiblingName("home-v6", s.Spec["cidr"].(string)) {
					t.Errorf("sibling %s named %s", s.Spec["cidr"], s.Name)
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("siblings (-want +got):\n%s", diff)
			}
		})
	}
}

// The parts outside the current prefix lie in the draining one, apart from
// the current prefix and from each other, and with what the two share make
// up the draining prefix whole.
func FuzzOutside(f *testing.F) {
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1}, uint8(56), []byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0x10}, uint8(60))
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0x11}, uint8(64), []byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0x10}, uint8(60))
	f.Add([]byte{0x20, 0x01, 0x0d, 0xb8, 0, 2}, uint8(48), []byte{0x20, 0x01, 0x0d, 0xb8, 0, 1}, uint8(48))
	f.Fuzz(func(t *testing.T, a []byte, abits uint8, b []byte, bbits uint8) {
		addr := func(x []byte) netip.Addr {
			var s [16]byte
			copy(s[:], x)
			return netip.AddrFrom16(s)
		}
		p := netip.PrefixFrom(addr(a), int(abits%129)).Masked()
		cur := netip.PrefixFrom(addr(b), int(bbits%129)).Masked()
		parts := outside(p, cur)
		size := func(q netip.Prefix) *big.Int { return new(big.Int).Lsh(big.NewInt(1), uint(128-q.Bits())) }
		total := new(big.Int)
		if p.Overlaps(cur) {
			total.Add(total, size(cur))
			if cur.Bits() < p.Bits() {
				total = size(p)
			}
		}
		for i, q := range parts {
			if !p.Contains(q.Addr()) || q.Bits() < p.Bits() || q.Overlaps(cur) {
				t.Fatalf("outside(%s, %s): %s not inside the first apart from the second", p, cur, q)
			}
			for _, r := range parts[i+1:] {
				if q.Overlaps(r) {
					t.Fatalf("outside(%s, %s): %s and %s overlap", p, cur, q, r)
				}
			}
			total.Add(total, size(q))
		}
		if total.Cmp(size(p)) != 0 {
			t.Fatalf("outside(%s, %s) = %v: with what they share, not the whole of %s", p, cur, parts, p)
		}
	})
}
