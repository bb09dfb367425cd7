// Command krew writes the krew plugin manifest (plugins/renumber.yaml in
// krew-index terms) of a release from its checksums.txt: one platform per
// kubectl-renumber_<version>_<os>_<arch>.tar.gz archive, each with its
// download URL and sha256. The release workflow attaches its output.
//
//	go run ./tools/krew -version 1.2.3 -checksums checksums.txt > renumber.yaml
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// archive names a plugin archive of the release: version, os, arch.
var archive = regexp.MustCompile(`^kubectl-renumber_([^_]+)_([a-z]+)_([a-z0-9]+)\.tar\.gz$`)

func main() {
	version := flag.String("version", "", "the release's version, without v")
	checksums := flag.String("checksums", "checksums.txt", "the release's sha256sum output")
	repo := flag.String("repo", "renumber/renumber", "the GitHub repository the release is in")
	flag.Parse()
	f, err := os.Open(*checksums)
	if err == nil {
		defer f.Close()
		err = write(os.Stdout, f, *version, *repo)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

// write reads sha256sum lines from sums and writes the manifest.
func write(out io.Writer, sums io.Reader, version, repo string) error {
	if version == "" || strings.HasPrefix(version, "v") {
		return fmt.Errorf("-version %q: want the version without v", version)
	}
	var platforms []platform
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, name, ok := strings.Cut(strings.TrimSpace(sc.Text()), "  ")
		m := archive.FindStringSubmatch(strings.TrimPrefix(name, "*"))
		if !ok || m == nil {
			continue
		}
		if m[1] != version {
			return fmt.Errorf("%s is not version %s", name, version)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
			return fmt.Errorf("%s: %q is not a sha256", name, sum)
		}
		p := platform{URI: fmt.Sprintf("https://github.com/%s/releases/download/v%s/%s", repo, version, m[0]), SHA256: sum, Bin: "kubectl-renumber"}
		p.Selector.MatchLabels = map[string]string{"os": m[2], "arch": m[3]}
		if m[2] == "windows" {
			p.Bin += ".exe"
		}
		platforms = append(platforms, p)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(platforms) == 0 {
		return fmt.Errorf("no kubectl-renumber archive in the checksums")
	}
	slices.SortFunc(platforms, func(a, b platform) int { return strings.Compare(a.URI, b.URI) })
	b, err := yaml.Marshal(map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "renumber"},
		"spec": map[string]any{
			"version":          "v" + version,
			"homepage":         "https://github.com/" + repo,
			"shortDescription": "Show what renumber does with a cluster's IPv6 prefixes",
			"description": "For each DynamicPrefix (dynamic-prefix.io): the current prefix and why, the nodes'\n" +
				"votes, draining prefixes, whether every pool, Service and BGP advertisement holds\n" +
				"what the renumber writer would write now, and who holds its Lease. Read-only\n" +
				"(the renumber-reader role). Also hands a cluster back to the existing\n" +
				"dynamic-prefix-operator (kubectl renumber handover).\n",
			"caveats":   "Needs the renumber-reader ClusterRole and Role (installed by the renumber chart)\nbound to your user; kubectl renumber status -h lists the flags.\n",
			"platforms": platforms,
		},
	})
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
