package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"path/filepath"
	"time"
)

// ServerName is the name every renumber process's metrics certificate
// carries when the install's CA issues it (Issued): the scrape job verifies
// it against that CA alone (its tls_config's server_name), so one name
// serves every agent and writer, whatever address it is scraped at.
const ServerName = "renumber-metrics"

// SelfSigned returns a TLS configuration serving a certificate made for this
// process alone, kept in memory and never written anywhere: it encrypts the
// scraper's bearer token on the wire, but no scraper can tell it from a
// stranger's (the install without its CA: Issued is what verifies).
func SelfSigned(name string, now time.Time) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := leaf(name, now, now.Add(10*365*24*time.Hour))
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return serving([][]byte{der}, key), nil
}

// Issued returns a TLS configuration serving a certificate for ServerName
// that the install's CA (tls.crt and tls.key in dir, the Secret
// renumber-metrics-ca) signs at start, with a key made for this process and
// kept in memory. A scraper that trusts that CA for renumber's job alone
// knows it speaks to a renumber process, not to whoever answers on a node's
// address, before it sends its token.
func Issued(dir string, now time.Time) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("metrics CA: %w", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("metrics CA: %w", err)
	}
	if !ca.IsCA {
		return nil, errors.New("metrics CA: tls.crt is not a CA certificate")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	// As long as the CA: the key lives in this process's memory alone, and
	// an agent may run for years without a restart.
	tmpl, err := leaf(ServerName, now, ca.NotAfter)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, pair.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("metrics CA: %w", err)
	}
	return serving([][]byte{der, ca.Raw}, key), nil
}

// Certificate is Issued when caDir is set, else SelfSigned(name). When the
// CA cannot be read (its Secret not made yet: the manifests mount it as
// optional) it logs why and serves SelfSigned: the agent's work is its
// digest, not its metrics, and a verifying scraper reports the target down
// (x509: certificate signed by unknown authority) rather than sending its
// token.
func Certificate(log *slog.Logger, caDir, name string, now time.Time) (*tls.Config, error) {
	if caDir == "" {
		return SelfSigned(name, now)
	}
	cfg, err := Issued(caDir, now)
	if err != nil {
		log.Warn("serving metrics with a self-signed certificate: scrapers that verify with the install's CA refuse it", "err", err)
		return SelfSigned(name, now)
	}
	return cfg, nil
}

func leaf(name string, now, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil
}

func serving(chain [][]byte, key *ecdsa.PrivateKey) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: key}},
	}
}
