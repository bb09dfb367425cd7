package main

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const sums = `1111111111111111111111111111111111111111111111111111111111111111  install.yaml
2222222222222222222222222222222222222222222222222222222222222222  renumber-1.2.3.tgz
3333333333333333333333333333333333333333333333333333333333333333  kubectl-renumber_1.2.3_linux_amd64.tar.gz
4444444444444444444444444444444444444444444444444444444444444444  kubectl-renumber_1.2.3_windows_amd64.tar.gz
5555555555555555555555555555555555555555555555555555555555555555  kubectl-renumber_1.2.3_darwin_arm64.tar.gz
`

// The manifest has one platform per plugin archive of the checksums, with
// its release URL, its sha256 and the binary krew links (.exe on Windows);
// the chart and install.yaml are not platforms.
func TestManifestListsEveryPluginArchive(t *testing.T) {
	var b bytes.Buffer
	if err := write(&b, strings.NewReader(sums), "1.2.3", "renumber/renumber"); err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			Version, Homepage, ShortDescription string
			Platforms                           []platform
		}
	}
	if err := yaml.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "renumber" || m.Spec.Version != "v1.2.3" || m.Spec.ShortDescription == "" {
		t.Errorf("header %+v", m)
	}
	want := map[string]string{
		"linux/amd64":   "3333333333333333333333333333333333333333333333333333333333333333 kubectl-renumber",
		"windows/amd64": "4444444444444444444444444444444444444444444444444444444444444444 kubectl-renumber.exe",
		"darwin/arm64":  "5555555555555555555555555555555555555555555555555555555555555555 kubectl-renumber",
	}
	if len(m.Spec.Platforms) != len(want) {
		t.Fatalf("platforms %+v", m.Spec.Platforms)
	}
	for _, p := range m.Spec.Platforms {
		l := p.Selector.MatchLabels
		key := l["os"] + "/" + l["arch"]
		if got := p.SHA256 + " " + p.Bin; got != want[key] {
			t.Errorf("%s: %s, want %s", key, got, want[key])
		}
		if wantURI := "https://github.com/renumber/renumber/releases/download/v1.2.3/kubectl-renumber_1.2.3_" + l["os"] + "_" + l["arch"] + ".tar.gz"; p.URI != wantURI {
			t.Errorf("%s: uri %s", key, p.URI)
		}
	}
}

// Checksums of another version, a sum that is not one, no archive at all or
// a version with its v are refused.
func TestManifestRefusesWhatIsNotThisRelease(t *testing.T) {
	for name, c := range map[string]struct{ sums, version string }{
		"another version": {sums, "1.2.4"},
		"not a sha256":    {"xyz  kubectl-renumber_1.2.3_linux_amd64.tar.gz\n", "1.2.3"},
		"no archive":      {"1111111111111111111111111111111111111111111111111111111111111111  install.yaml\n", "1.2.3"},
		"a v":             {sums, "v1.2.3"},
	} {
		if err := write(&bytes.Buffer{}, strings.NewReader(c.sums), c.version, "renumber/renumber"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
