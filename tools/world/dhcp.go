package world

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DHCPv6-PD in the world: ISC dhcpd (Debian's isc-dhcp-server) in the router
// namespace delegating prefixes from a pool (asked by the agents' built-in
// client), and ISC dhclient (isc-dhcp-client) on a node requesting one, in
// host mode: a hook installs the delegation as an unreachable route expiring
// with the lease, as routers-on-a-node setups do.

// Delegation is what the router's DHCPv6 server hands out.
type Delegation struct {
	// Pool: the prefixes delegated, each Length long (Pool.Bits() <= Length <= 64).
	Pool   netip.Prefix
	Length int
	// Valid, Preferred: the lifetimes of a delegation (dhcpd sets the renewal
	// at half the preferred lifetime).
	Valid, Preferred time.Duration
	// Preference: the server's Preference option (0: none sent).
	Preference int
	// Name, when set, makes the server's DUID a DUID-EN of ISC's enterprise
	// number (2495) and this identifier: ServerDUID gives it in hex.
	Name string
}

// ServerDUID is the DUID of a server configured with d.Name, in hex with
// colons as dhcpd and tcpdump print it ("" without a name).
func (d Delegation) ServerDUID() string {
	if d.Name == "" {
		return ""
	}
	b := append([]byte{0, 2, 0, 0, 0x09, 0xbf}, d.Name...)
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02x", c)
	}
	return strings.Join(parts, ":")
}

// DelegatePrefixes (re)starts the router's DHCPv6 server with d; the leases of
// an earlier pool are forgotten (a renumbering at the ISP).
func (r *Router) DelegatePrefixes(ctx context.Context, d Delegation) error {
	if _, err := exec.LookPath("dhcpd"); err != nil {
		return fmt.Errorf("world: dhcpd not installed (make deps: isc-dhcp-server): %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dhcpd != nil {
		r.net.w.Stop(r.dhcpd, 5*time.Second)
		r.dhcpd = nil
	}
	dir := filepath.Join(r.net.w.Dir, r.name+"-dhcpd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	last := d.Pool.Addr().As16()
	for i := d.Pool.Bits(); i < 128; i++ {
		last[i/8] |= 1 << (7 - i%8)
	}
	lastDelegation := netip.PrefixFrom(netip.AddrFrom16(last), d.Length).Masked().Addr()
	var extra string
	if d.Name != "" {
		extra += fmt.Sprintf("server-duid EN 2495 %q;\n", d.Name)
	}
	if d.Preference > 0 {
		extra += fmt.Sprintf("option dhcp6.preference %d;\n", d.Preference)
	}
	conf := extra + fmt.Sprintf(`default-lease-time %d;
max-lease-time %d;
preferred-lifetime %d;
authoritative;
subnet6 %s {
  prefix6 %s %s /%d;
}
`, int(d.Valid.Seconds()), int(d.Valid.Seconds()), int(d.Preferred.Seconds()),
		r.net.Control, d.Pool.Addr(), lastDelegation, d.Length)
	leases := filepath.Join(dir, "dhcpd6.leases")
	if err := os.WriteFile(filepath.Join(dir, "dhcpd6.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(leases, nil, 0o644); err != nil { // a new pool: no lease survives
		return err
	}
	return r.startDHCPD(dir)
}

// RestartDHCPServer stops the router's DHCPv6 server and starts it again
// with the same pool and its lease database: a router rebooting.
func (r *Router) RestartDHCPServer(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dhcpd == nil {
		return fmt.Errorf("world: %s runs no DHCPv6 server", r.name)
	}
	r.net.w.Stop(r.dhcpd, 5*time.Second)
	r.dhcpd = nil
	return r.startDHCPD(filepath.Join(r.net.w.Dir, r.name+"-dhcpd"))
}

// startDHCPD starts dhcpd on the configuration and leases in dir; r.mu is held.
func (r *Router) startDHCPD(dir string) error {
	cmd, err := r.net.w.spawn(r.NS, r.name+"-dhcpd.log", append(deviceOfItsOwn, "dhcpd", "-6", "-f", "-d", "-cf", filepath.Join(dir, "dhcpd6.conf"),
		"-lf", filepath.Join(dir, "dhcpd6.leases"), "-pf", filepath.Join(dir, "dhcpd6.pid"), "eth0")...)
	if err != nil {
		return err
	}
	r.dhcpd = cmd
	return nil
}

// hook is dhclient's script: the delegation becomes an unreachable route
// expiring with the lease; an old one goes when it is replaced or ends.
const hook = `#!/bin/sh
case "$reason" in
BOUND6|RENEW6|REBIND6|REBOOT6)
  if [ -n "$old_ip6_prefix" ] && [ "$old_ip6_prefix" != "$new_ip6_prefix" ]; then
    ip -6 route del unreachable "$old_ip6_prefix" 2>/dev/null
  fi
  if [ -n "$new_ip6_prefix" ]; then
    ip -6 route replace unreachable "$new_ip6_prefix" expires "${new_max_life:-600}"
  fi
  ;;
EXPIRE6|RELEASE6|STOP6)
  [ -n "$old_ip6_prefix" ] && ip -6 route del unreachable "$old_ip6_prefix" 2>/dev/null
  ;;
esac
exit 0
`

// RequestDelegation starts ISC dhclient on node, requesting a prefix
// delegation on its uplink (host mode: a hook installs it as a route).
func (w *World) RequestDelegation(node string) (*exec.Cmd, error) {
	if _, err := exec.LookPath("dhclient"); err != nil {
		return nil, fmt.Errorf("world: dhclient not installed (make deps: isc-dhcp-client): %w", err)
	}
	dir := filepath.Join(w.Dir, node+"-dhclient")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(script, []byte(hook), 0o755); err != nil {
		return nil, err
	}
	return w.Spawn(node, node+"-dhclient.log", "dhclient", "-6", "-P", "-d", "-v", "-sf", script,
		"-lf", filepath.Join(dir, "dhclient6.leases"), "-pf", filepath.Join(dir, "dhclient6.pid"), "eth0")
}
