package kubeconfig

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfigHead = `apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u}
clusters:
- name: k
  cluster:
    server: https://[fd00::1]:6443
`

func TestParse(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name    string
		yaml    string
		check   func(*Config) bool
		wantErr string
	}{
		{"token", kubeconfigHead + "users:\n- name: u\n  user: {token: abc}\n",
			func(c *Config) bool { return c.Server == "https://[fd00::1]:6443" && c.Token == "abc" && c.CA == nil }, ""},
		{"relative CA file and token file", strings.Replace(kubeconfigHead, "server:", "certificate-authority: ca.pem\n    server:", 1) + "users:\n- name: u\n  user: {tokenFile: tok}\n",
			func(c *Config) bool { return string(c.CA) == "CA" && c.TokenFile == filepath.Join(dir, "tok") }, ""},
		{"inline data", strings.Replace(kubeconfigHead, "server:", "certificate-authority-data: "+b64("CA2")+"\n    server:", 1) +
			"users:\n- name: u\n  user: {client-certificate-data: " + b64("CERT") + ", client-key-data: " + b64("KEY") + "}\n",
			func(c *Config) bool {
				return string(c.CA) == "CA2" && string(c.CertPEM) == "CERT" && string(c.KeyPEM) == "KEY"
			}, ""},
		{"insecure and server name", strings.Replace(kubeconfigHead, "server:", "insecure-skip-tls-verify: true\n    tls-server-name: api\n    server:", 1) + "users:\n- name: u\n  user: {}\n",
			func(c *Config) bool { return c.Insecure && c.ServerName == "api" }, ""},
		{"exec plugin refused", kubeconfigHead + "users:\n- name: u\n  user: {exec: {command: aws}}\n", nil, "exec credential plugins"},
		{"auth-provider refused", kubeconfigHead + "users:\n- name: u\n  user: {auth-provider: {name: oidc}}\n", nil, "auth-provider"},
		{"basic auth refused", kubeconfigHead + "users:\n- name: u\n  user: {username: a, password: b}\n", nil, "basic authentication"},
		{"certificate without key", kubeconfigHead + "users:\n- name: u\n  user: {client-certificate-data: " + b64("CERT") + "}\n", nil, "needs its key"},
		{"missing user", kubeconfigHead, nil, `user "u" not found`},
		{"missing context", strings.Replace(kubeconfigHead, "current-context: c", "current-context: x", 1), nil, `context "x" not found`},
		{"no current context", strings.Replace(kubeconfigHead, "current-context: c", "", 1), nil, "no current-context"},
		{"missing cluster", strings.Replace(kubeconfigHead, "- name: k", "- name: other", 1), nil, `cluster "k" not found`},
		{"missing CA file", strings.Replace(kubeconfigHead, "server:", "certificate-authority: nope.pem\n    server:", 1) + "users:\n- name: u\n  user: {token: a}\n", nil, "nope.pem"},
		{"bad base64", strings.Replace(kubeconfigHead, "server:", "certificate-authority-data: '%%%'\n    server:", 1), nil, "certificate authority"},
		{"not YAML", "{", nil, "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Errorf("config = %+v", cfg)
			}
		})
	}
}

func TestInClusterNeedsTheEnvironment(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Errorf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(kubeconfigHead + "users:\n- name: u\n  user: {token: abc}\n"))
	f.Add([]byte(`{"current-context":"c","contexts":[{"name":"c","context":{"cluster":"k"}}],"clusters":[{"name":"k","cluster":{"server":"http://x"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "")
		if err == nil && cfg.Server == "" {
			t.Fatal("accepted a kubeconfig without a server")
		}
	})
}
