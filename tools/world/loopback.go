package world

import (
	"net"
	"net/netip"
	"os"
	"sync/atomic"
)

// loopbacks numbers the loopback addresses this process hands out.
var loopbacks atomic.Uint32

// loopbackHost returns a loopback address no other call in this process
// returned: 127.<pid>.<n>.<n>. All of 127.0.0.0/8 is loopback on Linux, so a
// server can listen there without setup. A port chosen on 127.0.0.1 and
// closed until the server binds it can be taken in between by the outgoing
// connections and other servers the kernel numbers there (a shadow writer
// once found its metrics port held by another server under -parallel 8); on
// an address of its own nothing else binds, and the connections to it leave
// from 127.0.0.1 (the loopback route's source). 127.0.x.x, which holds
// 127.0.0.1 and the name servers' probeFrom, is never handed out.
func loopbackHost() netip.Addr {
	n := loopbacks.Add(1)
	return netip.AddrFrom4([4]byte{127, byte(1 + os.Getpid()%255), byte(n >> 8), byte(n)})
}

// loopbackAddr returns a loopback address of its own (loopbackHost) with a
// port nothing listens on.
func loopbackAddr() (netip.AddrPort, error) {
	host := loopbackHost()
	port, err := freePort(host.String())
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(host, uint16(port)), nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr returns a loopback address of its own with a port nothing
// listens on (loopbackAddr), for a writer's --metrics-addr.
func FreeAddr() (string, error) {
	ap, err := loopbackAddr()
	if err != nil {
		return "", err
	}
	return ap.String(), nil
}
