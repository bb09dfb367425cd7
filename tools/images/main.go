// Command images builds renumber's OCI images without Docker and without
// downloading a base image: one layer holding the static binary (and, for the
// agent, its cap_net_bind_service,cap_net_raw=ep file capabilities as the security.capability
// extended attribute), a minimal /etc/passwd and /etc/group for the non-root
// user 65532, OCI labels, and one index over linux/amd64 and linux/arm64.
// Reproducible: every timestamp is SOURCE_DATE_EPOCH (default 0), files are
// written in a fixed order, so the same binaries give the same digests.
//
//	images -name agent -agent-caps -bin linux/amd64=_out/images/agent-amd64 \
//	    -bin linux/arm64=_out/images/agent-arm64 -version v0.1.0 -out _out/images/agent.oci.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type bins map[string]string

func (b bins) String() string { return fmt.Sprint(map[string]string(b)) }
func (b bins) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	b[platform] = path
	return nil
}

func main() {
	spec := Spec{Binaries: bins{}}
	flag.StringVar(&spec.Name, "name", "", "the binary's name, /<name> in the image (agent, writer)")
	flag.Var(bins(spec.Binaries), "bin", "os/arch=path of the static binary for that platform (repeatable)")
	flag.BoolVar(&spec.Caps, "agent-caps", false, "give the binary cap_net_bind_service,cap_net_raw=ep as file capabilities")
	flag.StringVar(&spec.Version, "version", "dev", "image version (label, and the tag in the layout's reference)")
	flag.StringVar(&spec.Revision, "revision", "", "source revision (label)")
	out := flag.String("out", "", "OCI image layout tarball to write")
	flag.Parse()
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		s, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "SOURCE_DATE_EPOCH:", err)
			os.Exit(2)
		}
		spec.Created = time.Unix(s, 0).UTC()
	}
	if spec.Name == "" || len(spec.Binaries) == 0 || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: images -name N -bin os/arch=path [-bin ...] [-agent-caps] -out file")
		os.Exit(2)
	}
	f, err := os.Create(*out)
	if err == nil {
		var digest string
		digest, err = Write(f, spec)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			fmt.Printf("%s %s\n", *out, digest)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}
