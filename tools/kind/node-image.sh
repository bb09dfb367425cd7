#!/usr/bin/env bash
# The kind node image, built offline: what `kind create cluster --image` needs,
# as a pulled kindest/node provides it, from Debian's packages and binaries built
# from the Go module proxy (nothing is pulled from a registry).
#
#   tools/kind/node-image.sh IMAGE BIN_DIR ROOTFS_TAR KUBE_VERSION
#
# IMAGE       the tag to build (renumber/kind-node:<kubernetes version>)
# BIN_DIR     _out/bin: kubeadm kubelet kubectl kube-apiserver
#             kube-controller-manager kube-scheduler kube-proxy etcd coredns
#             containerd ctr containerd-shim-runc-v2 runc kindnet pause and
#             cni/{host-local,loopback,ptp,portmap}
# ROOTFS_TAR  a Debian bookworm rootfs (mmdebstrap, see the Makefile)
#
# Laid out as kind's images/base (its files are taken from the pinned kind
# module) and filled as `kind build node-image` fills it: the binaries in
# /usr/bin, containerd/runc/CNI where kind's base puts them, /kind/version,
# /kind/manifests/default-cni.yaml, and every image kubeadm needs preloaded in
# containerd's k8s.io namespace. The Pod network is tools/kindnet (kindnetd's
# module is not served here). The image carries a label with the hash of its
# inputs: an unchanged input set is not rebuilt.
set -euo pipefail
image=$1 bin=$2 rootfs=$3 kube_version=$4
here=$(cd "${0%/*}" && pwd)

log() { echo "node-image: $*" >&2; }

kind_dir=$(cd "$here" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
base_files=$kind_dir/images/base/files

binaries="kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy
etcd coredns containerd ctr containerd-shim-runc-v2 runc kindnet pause
cni/host-local cni/loopback cni/ptp cni/portmap"
for b in $binaries; do [ -x "$bin/$b" ] || { log "missing $bin/$b"; exit 1; }; done

# What kubeadm asks for at this version, and the sandbox image of kind's
# containerd config.
constants=$(cd "$here/../kube" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/cmd/kubeadm/app/constants/constants.go
etcd_tag=$(grep -o 'DefaultEtcdVersion = "[^"]*"' "$constants" | cut -d'"' -f2)
coredns_tag=$(grep -o 'CoreDNSVersion = "[^"]*"' "$constants" | cut -d'"' -f2)
pause_tags="$(grep -o 'sandbox_image = "[^"]*"' "$base_files/etc/containerd/config.toml" | cut -d'"' -f2) registry.k8s.io/pause:3.10.1"

inputs=$( (
	echo "$kube_version $etcd_tag $coredns_tag"
	cat "$0" "$here/kindnet.yaml" "$rootfs"
	for b in $binaries; do cat "$bin/$b"; done
	tar -C "$base_files" --sort=name --mtime=@0 --owner=0 --group=0 -c .
) | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{index .Config.Labels "io.renumber.inputs"}}' "$image" 2>/dev/null)" = "$inputs" ]; then
	log "$image is up to date ($inputs)"
	exit 0
fi

tmp=$(mktemp -d)
build=renumber-node-build-$$
cleanup() { docker rm -f "$build" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT

log "importing the rootfs"
docker import "$rootfs" renumber/kind-rootfs:bookworm >/dev/null

# single IMAGE FILE DEST [ENTRYPOINT]: an image of one static binary.
single() {
	local ref=$1 src=$2 dest=$3 entry=${4:-}
	local d=$tmp/img
	rm -rf "$d" && mkdir -p "$d/$(dirname "$dest")" "$d/etc" "$d/tmp"
	cp "$src" "$d/$dest"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$d/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$d/etc/group"
	local changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin')
	[ -n "$entry" ] && changes+=(--change "ENTRYPOINT [\"$entry\"]")
	tar -C "$d" -c . | docker import "${changes[@]}" - "$ref" >/dev/null
}
log "component images"
for c in kube-apiserver kube-controller-manager kube-scheduler; do
	single "registry.k8s.io/$c:$kube_version" "$bin/$c" "usr/local/bin/$c"
done
single "registry.k8s.io/etcd:$etcd_tag" "$bin/etcd" usr/local/bin/etcd
single "registry.k8s.io/coredns/coredns:$coredns_tag" "$bin/coredns" coredns /coredns
single docker.io/renumber/kindnet:dev "$bin/kindnet" kindnet /kindnet
for p in $pause_tags; do single "$p" "$bin/pause" pause /pause; done
# kube-proxy runs iptables and nft: it gets the node's userland.
mkdir -p "$tmp/proxy" && cp "$bin/kube-proxy" "$tmp/proxy/"
printf 'FROM renumber/kind-rootfs:bookworm\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' >"$tmp/proxy/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "registry.k8s.io/kube-proxy:$kube_version" "$tmp/proxy" >/dev/null
images="registry.k8s.io/kube-apiserver:$kube_version registry.k8s.io/kube-controller-manager:$kube_version
registry.k8s.io/kube-scheduler:$kube_version registry.k8s.io/kube-proxy:$kube_version
registry.k8s.io/etcd:$etcd_tag registry.k8s.io/coredns/coredns:$coredns_tag docker.io/renumber/kindnet:dev $pause_tags"

log "the node"
# --init reaps containerd once it is stopped (sleep, as PID 1, would not).
docker run -d --init --name "$build" --entrypoint sleep --security-opt seccomp=unconfined renumber/kind-rootfs:bookworm infinity >/dev/null
x() { docker exec "$build" "$@"; }
# kind's images/base files, with the modes its Dockerfile gives them.
tar -C "$base_files" -c . | docker exec -i "$build" tar -C / --no-same-owner -x
x sh -c 'chmod 0755 /usr/local/bin/* /kind /kind/bin /kind/bin/*'
for b in kubeadm kubelet kubectl; do docker cp "$bin/$b" "$build:/usr/bin/$b"; done
for b in containerd ctr containerd-shim-runc-v2; do docker cp "$bin/$b" "$build:/usr/local/bin/$b"; done
docker cp "$bin/runc" "$build:/usr/local/sbin/runc"
x mkdir -p /opt/cni/bin /kind/manifests /etc/kubernetes/manifests
for b in host-local loopback ptp portmap; do docker cp "$bin/cni/$b" "$build:/opt/cni/bin/$b"; done
# The Dockerfile's RUN steps of kind's base image.
x bash -c 'set -e
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
  /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
  /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo ReadKMsg=no >>/etc/systemd/journald.conf
ln -sf /usr/lib/systemd/systemd /sbin/init
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" \
  | jq "del(.process.rlimits)" >/etc/containerd/cri-base.json
chown root:root /usr/bin/kube* /usr/local/bin/* /usr/local/sbin/runc /opt/cni/bin/*'
printf '%s' "$kube_version" | docker exec -i "$build" sh -c 'cat >/kind/version'
docker exec -i "$build" sh -c 'cat >/kind/manifests/default-cni.yaml' <"$here/kindnet.yaml"

log "preloading $(echo "$images" | wc -w) images"
x bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &'
# shellcheck disable=SC2016 # expanded in the node
x bash -c 'for i in $(seq 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; cat /tmp/containerd.log; exit 1'
# shellcheck disable=SC2086 # a list of image references
docker save $images | docker exec -i "$build" ctr --namespace=k8s.io images import \
	--label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
x pkill containerd
# shellcheck disable=SC2016 # expanded in the node
x bash -c 'for i in $(seq 50); do pgrep containerd >/dev/null || exit 0; sleep 0.2; done; exit 1'
x rm -f /tmp/containerd.log

docker commit "$build" "$image-stage" >/dev/null
printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nLABEL io.renumber.inputs=%s\nENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]\nCMD []\n' \
	"$image-stage" "$inputs" | DOCKER_BUILDKIT=0 docker build -q -t "$image" - >/dev/null
docker rmi "$image-stage" >/dev/null
log "$image built ($inputs)"
