package main

import "testing"

func TestMetricsListenOnTheNodeIP(t *testing.T) {
	for _, c := range []struct{ addr, hostIP, want string }{
		{"127.0.0.1:9470", "2001:db8::7", "127.0.0.1:9470"},
		{"node:9470", "2001:db8::7", "[2001:db8::7]:9470"},
		{"node:9470", "192.0.2.7", "192.0.2.7:9470"},
	} {
		if got, err := listenAddr(c.addr, c.hostIP); err != nil || got != c.want {
			t.Errorf("listenAddr(%q, %q) = %q, %v; want %q", c.addr, c.hostIP, got, err, c.want)
		}
	}
	if _, err := listenAddr("node:9470", ""); err == nil {
		t.Error("node: without $HOST_IP was accepted")
	}
}
