package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// externalDNSReads is, for each external-dns the docs claim
// (docs/compatibility.md: "every version"), the annotation prefix its
// sources read a Service's hostname, target, ttl... under by default.
// From kubernetes-sigs/external-dns: source/source.go at v0.14.0
// (hostnameAnnotationKey "external-dns.alpha.kubernetes.io/hostname"),
// source/annotations/annotations.go at v0.19.0 (AnnotationKeyPrefix),
// v0.20.0 and v0.21.0 (DefaultAnnotationPrefix
// "external-dns.alpha.kubernetes.io/", --annotation-prefix to change it),
// v0.22.0 and main of 2026 (DefaultAnnotationPrefix
// "external-dns.kubernetes.io/"). Neither reads the other's keys.
// built is the release of each range that make external-dns builds for the
// DNS world (dig_test.go; the Makefile's EXTERNAL_DNS).
var externalDNSReads = []struct{ versions, prefix, built string }{
	{"external-dns up to v0.21", "external-dns.alpha.kubernetes.io/", "v0.21.0"},
	{"external-dns v0.22 and later", "external-dns.kubernetes.io/", "v0.22.0"},
}

// publishes reports whether every claimed external-dns reads want (key
// without its prefix -> value) from annotations, and what each reads.
func publishes(annotations, want map[string]string) (bool, string) {
	ok, got := true, externalDNSKeys(annotations)
	for _, read := range got {
		for k, v := range want {
			ok = ok && read[k] == v
		}
	}
	return ok, fmt.Sprint(got)
}

// externalDNSKeys is what each claimed external-dns reads from annotations:
// version -> key (without its prefix) -> value.
func externalDNSKeys(annotations map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range externalDNSReads {
		out[r.versions] = map[string]string{}
		for k, v := range annotations {
			if rest, ok := strings.CutPrefix(k, r.prefix); ok {
				out[r.versions][rest] = v
			}
		}
	}
	return out
}

// missedByAVersion lists, for annotations, each external-dns key some claimed
// version reads and another does not see the same (a version that would
// publish another record, or none).
func missedByAVersion(annotations map[string]string) []string {
	seen := externalDNSKeys(annotations)
	var out []string
	for _, r := range externalDNSReads {
		for _, o := range externalDNSReads {
			for k, v := range seen[o.versions] {
				if got, ok := seen[r.versions][k]; !ok || got != v {
					out = append(out, r.versions+" reads "+r.prefix+k+" = "+quoteOr(got, ok)+", "+o.versions+" "+o.prefix+k+" = "+v)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func quoteOr(s string, ok bool) string {
	if !ok {
		return "(none)"
	}
	return "\"" + s + "\""
}

// TestEveryExamplePublishesOnEveryClaimedExternalDNS: every object of
// manifests/examples that asks external-dns for a record asks each version
// the docs claim the same thing, under the keys that version reads - a
// hostname only the alpha key carries is no record at all on v0.22 - and the
// writer's default target keys reach every claimed version.
func TestEveryExamplePublishesOnEveryClaimedExternalDNS(t *testing.T) {
	files := exampleFiles(t)
	asking := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for key, o := range objects(t, b) {
			ann, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any)
			s := map[string]string{}
			for k, v := range ann {
				s[k], _ = v.(string)
			}
			keys := 0
			for _, read := range externalDNSKeys(s) {
				keys += len(read)
			}
			if keys == 0 {
				continue
			}
			asking++
			for _, m := range missedByAVersion(s) {
				t.Errorf("%s, %s: %s", filepath.Base(file), key, m)
			}
		}
	}
	if asking == 0 {
		t.Error("no example asks external-dns for a record: the test checks nothing")
	}
	for _, r := range externalDNSReads {
		if !slices.Contains(holdings.DefaultTargetKeys, r.prefix+"target") {
			t.Errorf("the writer's default target keys %q miss %starget, which %s reads", holdings.DefaultTargetKeys, r.prefix, r.versions)
		}
	}
}
