// A Zone is a real authoritative name server (BIND 9, Debian's named) for one
// test zone, in a namespace of its own on the world's bridge, accepting
// RFC 2136 dynamic updates signed with a TSIG key made for this world: the
// user's DNS that external-dns keeps (the rfc2136 provider).

package world

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Zone is one named serving one zone.
type Zone struct {
	Name string     // the zone, without the final dot (example.test)
	Addr netip.Addr // where named listens (port 53), on the world's bridge
	NS   string     // its network namespace
	// The TSIG key allowed to update and transfer the zone.
	KeyName, KeyAlg, KeySecret string
	w                          *World
	cmd                        *exec.Cmd
}

// tsigSecret reads the secret out of tsig-keygen's key statement.
var tsigSecret = regexp.MustCompile(`secret "([A-Za-z0-9+/=]+)";`)

// StartZone starts named in namespace rn<id>-dns at <control prefix>::53,
// authoritative for zone, holding records (zone-file lines, names relative
// to the zone) besides its SOA and NS, and returns once it answers.
func (w *World) StartZone(ctx context.Context, zone string, records ...string) (*Zone, error) {
	for _, tool := range []string{"named", "tsig-keygen", "dig"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("world: %s not found (make deps: bind9, bind9-utils, bind9-dnsutils): %w", tool, err)
		}
	}
	z := &Zone{w: w, Name: zone, NS: "rn" + w.ID + "-dns", KeyName: "externaldns-" + w.ID, KeyAlg: "hmac-sha256",
		Addr: netip.MustParseAddr("fd72:6e75:" + w.ID + "::53")}
	dir := filepath.Join(w.Dir, "bind")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	key, err := exec.CommandContext(ctx, "tsig-keygen", "-a", z.KeyAlg, z.KeyName).Output()
	if err != nil {
		return nil, fmt.Errorf("world: tsig-keygen: %w", err)
	}
	m := tsigSecret.FindSubmatch(key)
	if m == nil {
		return nil, fmt.Errorf("world: no secret in tsig-keygen's output %q", key)
	}
	z.KeySecret = string(m[1])
	zoneFile := fmt.Sprintf("$TTL 60\n@ IN SOA ns.%[1]s. hostmaster.%[1]s. 1 60 60 600 60\n@ IN NS ns.%[1]s.\nns IN AAAA %[2]s\n%[3]s\n",
		zone, z.Addr, strings.Join(records, "\n"))
	// No rndc channel (controls {}), no recursion: one zone, answered
	// from this namespace only.
	conf := fmt.Sprintf(`options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	listen-on { none; };
	listen-on-v6 { %[2]s; };
	recursion no;
	dnssec-validation no;
	notify no;
	allow-query { any; };
};
controls { };
include "%[1]s/tsig.key";
zone "%[3]s" {
	type primary;
	file "%[1]s/%[3]s.zone";
	allow-update { key "%[4]s"; };
	allow-transfer { key "%[4]s"; };
};
`, dir, z.Addr, zone, z.KeyName)
	for name, data := range map[string]string{"tsig.key": string(key), zone + ".zone": zoneFile, "named.conf": conf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return nil, fmt.Errorf("world: %w", err)
		}
	}
	if err := w.Net.addNS(ctx, z.NS); err != nil {
		return nil, err
	}
	if err := w.Net.attach(ctx, z.NS, "p-dns", z.Addr, "net.ipv6.conf.eth0.accept_ra=0", "net.ipv6.conf.eth0.accept_dad=0"); err != nil {
		return nil, err
	}
	// -g: in the foreground, logging to the world's log; as root (no -u),
	// which the world's directory needs; one worker thread is plenty.
	if z.cmd, err = w.spawn(z.NS, "named.log", "named", "-g", "-6", "-n", "1", "-c", filepath.Join(dir, "named.conf")); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		soa, err := z.Dig(ctx, zone, "SOA")
		if err == nil && len(soa) == 1 {
			return z, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("world: named does not answer for %s at %s: %v %q", zone, z.Addr, err, soa)
		}
	}
}

// Dig asks named for name's records of type qtype, as a user would (dig
// +short, no recursion), and returns the answers in the order given.
func (z *Zone) Dig(ctx context.Context, name, qtype string) ([]string, error) {
	return z.dig(ctx, "", "+short", "+norecurse", name, qtype)
}

// DigFrom is Dig asked from inside namespace ns (a client beyond the
// router: named must have a route back to it, RouteTo).
func (z *Zone) DigFrom(ctx context.Context, ns, name, qtype string) ([]string, error) {
	return z.dig(ctx, ns, "+short", "+norecurse", name, qtype)
}

// RouteTo routes named's answers to dst through via (the world's router, for
// a client on its WAN side): named's namespace knows only the bridge's /64.
func (z *Zone) RouteTo(ctx context.Context, dst netip.Prefix, via netip.Addr) error {
	return run(ctx, "ip", "-n", z.NS, "-6", "route", "replace", dst.String(), "via", via.String())
}

// Transfer returns the whole zone (an AXFR signed with the key), one record
// a line, without the SOA and the TSIG record.
func (z *Zone) Transfer(ctx context.Context) ([]string, error) {
	lines, err := z.dig(ctx, "", "+noall", "+answer", "+nottlid", "-y", z.KeyAlg+":"+z.KeyName+":"+z.KeySecret, z.Name, "AXFR")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 3 && f[2] != "SOA" && f[2] != "TSIG" {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out, nil
}

// SOA is the zone's SOA record as named answers it: its serial moves with
// every dynamic update.
func (z *Zone) SOA(ctx context.Context) (string, error) {
	soa, err := z.Dig(ctx, z.Name, "SOA")
	if err != nil || len(soa) != 1 {
		return "", fmt.Errorf("world: the SOA of %s: %q, %w", z.Name, soa, err)
	}
	return soa[0], nil
}

// dig runs dig against named, in namespace ns ("" the root namespace).
func (z *Zone) dig(ctx context.Context, ns string, args ...string) ([]string, error) {
	argv := append([]string{"dig", "@" + z.Addr.String(), "+time=2", "+tries=1"}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		return nil, fmt.Errorf("dig %s: %w", strings.Join(argv, " "), err)
	}
	var lines []string
	for l := range strings.Lines(string(out)) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// Stop ends named.
func (z *Zone) Stop() { z.w.Stop(z.cmd, 5*time.Second) }

// ExternalDNS is one running external-dns.
type ExternalDNS struct {
	Cmd     *exec.Cmd
	Metrics string // its metrics address (host:port, loopback)
}

// StartExternalDNS runs the external-dns binary named bin in _out/bin (make
// external-dns) in the root namespace as the cluster's admin, keeping z's
// records for the world's Services over RFC 2136 (the TXT registry: it
// removes only what it created), with extra flags after the world's. Its
// log is <world>/<bin>.log.
func (w *World) StartExternalDNS(bin string, z *Zone, extra ...string) (*ExternalDNS, error) {
	path, err := Bin(bin)
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	argv := append([]string{path, "--kubeconfig", w.API.AdminFile, "--metrics-address", metrics,
		"--source=service", "--provider=rfc2136", "--registry=txt", "--txt-owner-id", "world-" + w.ID,
		"--domain-filter", z.Name, "--rfc2136-host", z.Addr.String(), "--rfc2136-port=53", "--rfc2136-zone", z.Name,
		"--rfc2136-tsig-keyname", z.KeyName, "--rfc2136-tsig-secret", z.KeySecret, "--rfc2136-tsig-secret-alg", z.KeyAlg,
		"--rfc2136-tsig-axfr"}, extra...)
	cmd, err := w.spawn("", bin+".log", argv...)
	if err != nil {
		return nil, err
	}
	return &ExternalDNS{Cmd: cmd, Metrics: metrics}, nil
}

// LastSync is when external-dns last finished a sync with the zone (its
// external_dns_controller_last_sync_timestamp_seconds; zero before the
// first).
func (e *ExternalDNS) LastSync(ctx context.Context) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.Metrics+"/metrics", nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("world: external-dns metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return time.Time{}, err
	}
	for l := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "external_dns_controller_last_sync_timestamp_seconds "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f == 0 {
				return time.Time{}, err
			}
			return time.Unix(0, int64(f*1e9)), nil
		}
	}
	return time.Time{}, nil
}
