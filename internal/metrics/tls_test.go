package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// newCA writes a CA as the Secret renumber-metrics-ca holds it (tls.crt,
// tls.key) into a new directory, and returns the directory and a pool
// trusting it.
func newCA(t *testing.T, isCA bool) (string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "renumber-metrics-ca"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(10 * 365 * 24 * time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return dir, pool
}

// handshake serves cfg on loopback and shakes hands as a scraper that trusts
// roots for ServerName.
func handshake(t *testing.T, cfg *tls.Config, roots *x509.CertPool) error {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(),
		&tls.Config{RootCAs: roots, ServerName: ServerName, Time: func() time.Time { return testNow }})
	if err == nil {
		_ = c.Close()
	}
	return err
}

// A scraper that trusts the install's CA accepts a process's certificate the
// CA issued, and refuses one another CA issued or none did: the answer of
// whoever else sits on a node's address.
func TestAScraperVerifiesTheCertificateWithTheInstallsCA(t *testing.T) {
	dir, roots := newCA(t, true)
	otherDir, _ := newCA(t, true)
	issued, err := Issued(dir, testNow)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Issued(otherDir, testNow)
	if err != nil {
		t.Fatal(err)
	}
	self, err := SelfSigned(ServerName, testNow)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		cfg    *tls.Config
		accept bool
	}{
		{"issued by the install's CA", issued, true},
		{"issued by another CA", other, false},
		{"self-signed", self, false},
	} {
		if err := handshake(t, c.cfg, roots); (err == nil) != c.accept {
			t.Errorf("%s: handshake error %v, want accepted %v", c.name, err, c.accept)
		}
	}
}

func TestACertificateThatIsNoCAIssuesNothing(t *testing.T) {
	dir, _ := newCA(t, false)
	if _, err := Issued(dir, testNow); err == nil {
		t.Error("Issued with a leaf certificate for a CA: no error")
	}
}

// Without the CA's Secret the process still serves, self-signed, so its
// digest work goes on; a verifying scraper refuses it (above).
func TestWithoutTheCAMetricsAreServedSelfSigned(t *testing.T) {
	cfg, err := Certificate(slog.New(slog.NewTextHandler(io.Discard, nil)), filepath.Join(t.TempDir(), "absent"), "renumber-agent.n1", testNow)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "renumber-agent.n1" {
		t.Errorf("certificate for %q, want the self-signed renumber-agent.n1", leaf.Subject.CommonName)
	}
}
