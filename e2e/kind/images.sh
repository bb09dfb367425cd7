#!/usr/bin/env bash
# The images the kind e2e runs, built with `docker build` from the project's
# Dockerfiles, unchanged:
#
#   e2e/kind/images.sh CHART_VERSION
#
# renumber/agent:dev and renumber/writer:dev (what manifests/ names), the same
# images as ghcr.io/renumber/renumber-{agent,writer}:CHART_VERSION (what the
# packaged chart names), and renumber/e2e-router:dev.
#
# Where the base images those Dockerfiles name cannot be pulled (no registry
# here), stand-ins are built first and tagged with those names, inside the
# engine only (the private one of engine.sh, or a test daemon): see
# base_images. A machine that can pull them never builds a stand-in.
set -euo pipefail
cd "${0%/*}/../.."
top=$PWD
version=$1
BIN=${BIN:-$top/_out/bin}
rootfs=${ROOTFS:-$top/_out/kind/rootfs.tar}

log() { echo "images: $*" >&2; }
# Every stand-in carries this label (e2e/kind's TestStandInBaseImages checks them).
label=io.renumber.stand-in=true
have() { docker image inspect "$1" >/dev/null 2>&1; }
pullable() { have "$1" || docker pull -q "$1" >/dev/null 2>&1; }

# stand_in NAME: import a directory tree as image NAME with docker import's
# --change arguments after it.
stand_in() {
	local name=$1 dir=$2
	shift 2
	tar -C "$dir" --owner=0 --group=0 -c . | docker import --change "LABEL $label" "$@" - "$name" >/dev/null
	log "stand-in $name"
}

base_images() {
	local tmp
	tmp=$(mktemp -d)
	# debian:bookworm-slim: a minbase Debian bookworm (mmdebstrap).
	if ! pullable debian:bookworm-slim; then
		docker import --change "LABEL $label" "$rootfs" debian:bookworm-slim >/dev/null
		log "stand-in debian:bookworm-slim"
	fi
	# golang:1.26-bookworm: that Debian with this machine's Go toolchain where
	# the golang image puts it, and the golang image's environment. It trusts
	# the CAs this machine trusts (its module downloads may pass a
	# TLS-inspecting proxy whose CA Debian's bundle lacks).
	if ! pullable golang:1.26-bookworm; then
		mkdir -p "$tmp/golang/usr/local" "$tmp/golang/go/bin" "$tmp/golang/go/src" "$tmp/golang/etc/ssl/certs"
		cp -a "$(go env GOROOT)" "$tmp/golang/usr/local/go"
		cp /etc/ssl/certs/ca-certificates.crt "$tmp/golang/etc/ssl/certs/"
		printf 'FROM debian:bookworm-slim\nCOPY . /\nLABEL %s\nENV GOLANG_VERSION=%s GOTOOLCHAIN=local GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nWORKDIR /go\n' \
			"$label" "$(go env GOVERSION | sed 's/^go//')" >"$tmp/golang.Dockerfile"
		# The legacy builder warns it is deprecated: its output is shown only on failure.
		DOCKER_BUILDKIT=0 docker build -q -f "$tmp/golang.Dockerfile" -t golang:1.26-bookworm "$tmp/golang" >"$tmp/golang.log" 2>&1 ||
			{ cat "$tmp/golang.log" >&2; log "building the golang stand-in failed"; exit 1; }
		log "stand-in golang:1.26-bookworm ($(go env GOVERSION))"
	fi
	# gcr.io/distroless/static-debian12:nonroot: what distroless static holds -
	# passwd and group with root, nobody and nonroot (65532), CA certificates,
	# tzdata, /tmp - and its defaults: user 65532, working directory its home.
	if ! pullable gcr.io/distroless/static-debian12:nonroot; then
		local d=$tmp/distroless
		mkdir -p "$d/etc/ssl/certs" "$d/usr/share" "$d/home/nonroot" "$d/tmp"
		chmod 1777 "$d/tmp" && chown 65532:65532 "$d/home/nonroot"
		printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$d/etc/passwd"
		printf 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n' >"$d/etc/group"
		cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/"
		cp -a /usr/share/zoneinfo "$d/usr/share/"
		stand_in gcr.io/distroless/static-debian12:nonroot "$d" \
			--change 'USER 65532' --change 'WORKDIR /home/nonroot' \
			--change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'
	fi
	# docker/dockerfile:1, the frontend the Dockerfiles' syntax line names:
	# BuildKit's own, built from the module proxy (make kind-tools).
	if ! pullable docker/dockerfile:1; then
		mkdir -p "$tmp/frontend/bin" && cp "$BIN/dockerfile-frontend" "$tmp/frontend/bin/"
		stand_in docker/dockerfile:1 "$tmp/frontend" --change 'ENTRYPOINT ["/bin/dockerfile-frontend"]' \
			--change 'LABEL moby.buildkit.frontend.network.none="true"' \
			--change 'LABEL moby.buildkit.frontend.caps="moby.buildkit.frontend.inputs,moby.buildkit.frontend.subrequests,moby.buildkit.frontend.contexts"'
	fi
	rm -rf "$tmp"
}

# BuildKit builds (the Dockerfiles use RUN --mount): Debian's docker.io client
# has BuildKit built in; newer clients need the buildx plugin for it.
build() {
	local client=docker
	[ -x /usr/bin/docker ] && ! docker buildx version >/dev/null 2>&1 && client=/usr/bin/docker
	# --network host: the build steps download Go modules and Debian packages;
	# the private engine gives containers no route off the machine.
	DOCKER_BUILDKIT=1 "$client" build -q --network host "$@" >/dev/null
}

base_images
log "Dockerfile.agent, Dockerfile.writer, e2e/kind/Dockerfile.router"
build -f Dockerfile.agent -t renumber/agent:dev .
build -f Dockerfile.writer -t renumber/writer:dev .
build -f e2e/kind/Dockerfile.router -t renumber/e2e-router:dev .
docker tag renumber/agent:dev "ghcr.io/renumber/renumber-agent:$version"
docker tag renumber/writer:dev "ghcr.io/renumber/renumber-writer:$version"
