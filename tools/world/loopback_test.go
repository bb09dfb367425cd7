package world

import (
	"net"
	"net/netip"
	"testing"
)

func TestEachServerGetsALoopbackAddressOfItsOwn(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for range 600 { // past the 256 that fill the last octet
		a := loopbackHost()
		if !a.IsLoopback() || !a.Is4() {
			t.Fatalf("%s is not an IPv4 loopback address", a)
		}
		if a.As4()[1] == 0 {
			t.Fatalf("%s is in 127.0.x.x, which holds 127.0.0.1 and probeFrom", a)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
}

func TestAFreeAddressCanBeListenedOn(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if netip.MustParseAddrPort(addr).Addr() == netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("%s: a port on 127.0.0.1 can be taken before the server binds it", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("a server cannot listen on %s: %v", addr, err)
	}
	l.Close()
}
