package main

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, cidrs []string, addrs ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

func TestEachNodeRoutesTheOthersPodCIDRsViaTheirAddressOfTheSameFamily(t *testing.T) {
	nodes := []corev1.Node{
		node("cp", []string{"10.244.0.0/24", "fd00:10:244::/64"}, "172.18.0.2", "fc00:f853:ccd:e793::2"),
		node("w1", []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, "172.18.0.3", "fc00:f853:ccd:e793::3"),
		node("w2", nil, "172.18.0.4"), // no Pod CIDR yet: nothing to route
	}
	p, err := PlanFor("w1", nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{
		{Dst: netip.MustParsePrefix("10.244.0.0/24"), Via: netip.MustParseAddr("172.18.0.2")},
		{Dst: netip.MustParsePrefix("fd00:10:244::/64"), Via: netip.MustParseAddr("fc00:f853:ccd:e793::2")},
	}
	if d := cmp.Diff(want, p.Routes, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("routes (-want +got):\n%s", d)
	}
	var conf struct {
		Plugins []struct {
			Type string
			IPAM struct{ Ranges [][]struct{ Subnet string } }
		}
	}
	if err := json.Unmarshal(p.Conf, &conf); err != nil {
		t.Fatal(err)
	}
	if conf.Plugins[0].Type != "ptp" || len(conf.Plugins[0].IPAM.Ranges) != 2 ||
		conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" || conf.Plugins[0].IPAM.Ranges[1][0].Subnet != "fd00:10:244:1::/64" {
		t.Errorf("conf for w1's Pod CIDRs: %s", p.Conf)
	}
}

func TestANodeWithoutPodCIDRsGetsNoConfiguration(t *testing.T) {
	p, err := PlanFor("w2", []corev1.Node{node("w2", nil, "172.18.0.4")})
	if err != nil || p.Conf != nil {
		t.Errorf("plan %+v, %v: want no configuration until the node has a Pod CIDR", p, err)
	}
}

func TestAGarbledPodCIDRIsAnError(t *testing.T) {
	if _, err := PlanFor("w1", []corev1.Node{node("cp", []string{"10.244.0.0/33"})}); err == nil {
		t.Error("want an error for 10.244.0.0/33")
	}
}
