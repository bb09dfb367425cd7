package main

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is one image to build.
type Spec struct {
	Name     string
	Binaries map[string]string // "linux/amd64" -> path
	Caps     bool              // the agent's file capabilities
	Version  string
	Revision string
	Created  time.Time // every timestamp (zero: the Unix epoch)
}

// User is who the binary runs as: distroless's nonroot.
const User = "65532:65532"

// Repository is the images' name: what the manifests' renumber/agent and
// renumber/writer resolve to in containerd.
const Repository = "docker.io/renumber/"

// agentCaps is the security.capability value for
// cap_net_bind_service,cap_net_raw=ep: VFS revision 2 with the effective flag,
// CAP_NET_BIND_SERVICE (10: the DHCPv6 client port) and CAP_NET_RAW (13: the
// raw ICMPv6 socket) permitted.
func agentCaps() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|0x000001)
	binary.LittleEndian.PutUint32(b[4:], 1<<10|1<<13)
	return b
}

// layer is the image's one layer: /etc/passwd, /etc/group and /<name>.
func layer(s Spec, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mod := s.Created
	if mod.IsZero() {
		mod = time.Unix(0, 0).UTC()
	}
	add := func(name string, mode int64, body []byte, pax map[string]string) error {
		hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: mod, Typeflag: tar.TypeReg,
			Uname: "root", Gname: "root", Format: tar.FormatPAX, PAXRecords: pax}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, ModTime: mod, Typeflag: tar.TypeDir, Uname: "root", Gname: "root", Format: tar.FormatPAX})
	}
	var pax map[string]string
	if s.Caps {
		pax = map[string]string{"SCHILY.xattr.security.capability": string(agentCaps())}
	}
	err := dir("etc/")
	if err == nil {
		err = add("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"), nil)
	}
	if err == nil {
		err = add("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), nil)
	}
	if err == nil {
		err = add(s.Name, 0o755, bin, pax)
	}
	if err == nil {
		err = tw.Close()
	}
	return buf.Bytes(), err
}

// Image builds the image of one platform ("os/arch").
func Image(s Spec, platform string, bin []byte) (v1.Image, error) {
	tarBytes, err := layer(s, bin)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), l)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	osName, arch, _ := strings.Cut(platform, "/")
	cf.OS, cf.Architecture = osName, arch
	cf.Config.User = User
	cf.Config.Entrypoint = []string{"/" + s.Name}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = Labels(s)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}

// Labels are the OCI annotations the image config carries.
func Labels(s Spec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "renumber-" + s.Name,
		"org.opencontainers.image.description": "renumber " + s.Name + ": keeps Cilium's IPv6 pools in step with a changing ISP prefix",
		"org.opencontainers.image.source":      "https://github.com/renumber/renumber",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     s.Version,
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	return l
}

// Index builds the multi-platform index, named for containerd's import.
func Index(s Spec) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range slices.Sorted(maps.Keys(s.Binaries)) {
		bin, err := os.ReadFile(s.Binaries[platform])
		if err != nil {
			return nil, err
		}
		img, err := Image(s, platform, bin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", platform, err)
		}
		osName, arch, _ := strings.Cut(platform, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: osName, Architecture: arch}}})
	}
	return idx, nil
}

// Write writes the image as an OCI image layout tarball (ctr images import,
// skopeo, crane all read it) and returns the index digest.
func Write(w io.Writer, s Spec) (string, error) {
	idx, err := Index(s)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "renumber-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	ref := Repository + s.Name + ":" + s.Version
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref, "io.containerd.image.name": ref,
	})); err != nil {
		return "", err
	}
	if err := tarDir(w, dir, s.Created); err != nil {
		return "", err
	}
	d, err := idx.Digest()
	return d.String(), err
}

// tarDir writes dir's files in name order with fixed metadata.
func tarDir(w io.Writer, dir string, mod time.Time) error {
	if mod.IsZero() {
		mod = time.Unix(0, 0).UTC()
	}
	tw := tar.NewWriter(w)
	// WalkDir visits in lexical order: the tarball is the same every time.
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		name, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(name), Mode: 0o644, Size: int64(len(b)), ModTime: mod, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
