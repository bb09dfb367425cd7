// Command chartfiles copies the manifests the chart embeds (its RBAC,
// admission policies, CRD, alerts and dashboard) from manifests/ into
// charts/renumber/files, so that manifests/ stays their one source and a Git
// checkout of the chart is complete without symbolic links (Flux's
// GitRepository skips them; Helm warns on each). Its test keeps the copies
// equal to their sources: run `make chart-files` after changing one.
//
//	go run ./tools/chartfiles [-root .]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// sources maps each file of charts/renumber/files to its source in manifests/.
var sources = map[string]string{
	"agent-policy.yaml":         "agent/policy.yaml",
	"agent-rbac.yaml":           "agent/rbac.yaml",
	"crd.yaml":                  "crds/dynamicprefixes.yaml",
	"metrics-rbac.yaml":         "base/metrics.yaml",
	"scraper.yaml":              "monitoring/scraper.yaml",
	"dashboard.json":            "monitoring/dashboard.json",
	"reader-rbac.yaml":          "reader/rbac.yaml",
	"rules.yaml":                "monitoring/rules.yaml",
	"shadow-rbac.yaml":          "shadow/rbac.yaml",
	"writer-policy.yaml":        "writer/policy.yaml",
	"writer-policy-calico.yaml": "writer/policy-calico.yaml",
	"writer-policy-cilium.yaml": "writer/policy-cilium.yaml",
	"writer-policy-values.yaml": "writer/policy-values.yaml",
	"writer-rbac.yaml":          "writer/rbac.yaml",
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "chartfiles:", err)
		os.Exit(1)
	}
}

// write copies every source over its chart file (a symbolic link there is
// replaced by the file).
func write(root string) error {
	dir := filepath.Join(root, "charts", "renumber", "files")
	for name, src := range sources {
		b, err := os.ReadFile(filepath.Join(root, "manifests", src))
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, name)
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			return err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
