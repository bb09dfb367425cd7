// Package kubeconfig says how the agent reaches its API server: a kubeconfig
// file (the parts of the format a client needs) or a Pod's in-cluster
// configuration. Package kubehttp is the client it configures.
package kubeconfig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Config says how to reach and authenticate to one API server.
type Config struct {
	Server     string // https://host:port
	CA         []byte // PEM; none: the system's roots
	Insecure   bool   // insecure-skip-tls-verify
	ServerName string // tls-server-name
	CertPEM    []byte // client certificate and key, both or neither
	KeyPEM     []byte
	Token      string
	// TokenFile is read for every request: kubelet rotates projected
	// ServiceAccount tokens in place.
	TokenFile string
	UserAgent string
}

// In-cluster locations (a Pod's projected ServiceAccount volume).
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	inClusterToken    = serviceAccountDir + "/token"
	inClusterCA       = serviceAccountDir + "/ca.crt"
)

// Load reads the kubeconfig at path, or the in-cluster configuration when path
// is "".
func Load(path string) (*Config, error) {
	if path == "" {
		return InCluster()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := Parse(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// InCluster is the configuration of a Pod: the kubernetes Service from the
// environment, the ServiceAccount's token and CA from their mounted files.
func InCluster() (*Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("kubeconfig: not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset) and no --kubeconfig given")
	}
	ca, err := os.ReadFile(inClusterCA)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: in-cluster CA: %w", err)
	}
	if _, err := os.Stat(inClusterToken); err != nil {
		return nil, fmt.Errorf("kubeconfig: in-cluster token: %w", err)
	}
	return &Config{Server: "https://" + net.JoinHostPort(host, port), CA: ca, TokenFile: inClusterToken}, nil
}

// kubeconfig is the part of the file format this client understands.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData string `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
			TLSServerName            string `json:"tls-server-name"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData string `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         string `json:"client-key-data"`
			Exec                  any    `json:"exec"`
			AuthProvider          any    `json:"auth-provider"`
			Username              string `json:"username"`
		} `json:"user"`
	} `json:"users"`
}

// Parse reads a kubeconfig's current context. Relative file names are
// resolved against dir, as kubectl does. Credential plugins (exec,
// auth-provider) and basic auth are refused by name: the agent runs in a Pod and
// uses its ServiceAccount; a kubeconfig is for development and tests.
func Parse(data []byte, dir string) (*Config, error) {
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, err
	}
	if kc.CurrentContext == "" {
		return nil, errors.New("no current-context")
	}
	var clusterName, userName string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName, found = c.Context.Cluster, c.Context.User, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("context %q not found", kc.CurrentContext)
	}
	cfg := &Config{}
	found = false
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		cl := c.Cluster
		cfg.Server, cfg.Insecure, cfg.ServerName = cl.Server, cl.InsecureSkipTLSVerify, cl.TLSServerName
		var err error
		if cfg.CA, err = dataOrFile(cl.CertificateAuthorityData, cl.CertificateAuthority, dir); err != nil {
			return nil, fmt.Errorf("cluster %q: certificate authority: %w", clusterName, err)
		}
		break
	}
	if !found {
		return nil, fmt.Errorf("cluster %q not found", clusterName)
	}
	if cfg.Server == "" {
		return nil, fmt.Errorf("cluster %q has no server", clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		us := u.User
		switch {
		case us.Exec != nil:
			return nil, fmt.Errorf("user %q: exec credential plugins are not supported; use a token or a client certificate", userName)
		case us.AuthProvider != nil:
			return nil, fmt.Errorf("user %q: auth-provider plugins are not supported; use a token or a client certificate", userName)
		case us.Username != "":
			return nil, fmt.Errorf("user %q: basic authentication is not supported; use a token or a client certificate", userName)
		}
		cfg.Token = us.Token
		if us.TokenFile != "" {
			cfg.TokenFile = resolve(us.TokenFile, dir)
		}
		var err error
		if cfg.CertPEM, err = dataOrFile(us.ClientCertificateData, us.ClientCertificate, dir); err != nil {
			return nil, fmt.Errorf("user %q: client certificate: %w", userName, err)
		}
		if cfg.KeyPEM, err = dataOrFile(us.ClientKeyData, us.ClientKey, dir); err != nil {
			return nil, fmt.Errorf("user %q: client key: %w", userName, err)
		}
		if (cfg.CertPEM == nil) != (cfg.KeyPEM == nil) {
			return nil, fmt.Errorf("user %q: a client certificate needs its key and the other way round", userName)
		}
		return cfg, nil
	}
	if userName != "" {
		return nil, fmt.Errorf("user %q not found", userName)
	}
	return cfg, nil
}

// dataOrFile returns the inline base64 data, else the named file's contents,
// else nil.
func dataOrFile(data, file, dir string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(data)
	}
	if file != "" {
		return os.ReadFile(resolve(file, dir))
	}
	return nil, nil
}

func resolve(file, dir string) string {
	if filepath.IsAbs(file) || dir == "" {
		return file
	}
	return filepath.Join(dir, file)
}
