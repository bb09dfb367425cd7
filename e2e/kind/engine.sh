#!/usr/bin/env bash
# A container engine for `make e2e-kind` on a machine that has none.
#
#   e2e/kind/engine.sh start   print DOCKER_HOST=... for an engine that answers
#   e2e/kind/engine.sh stop    stop the private daemon, restore host settings
#
# With a Docker that answers already (DOCKER_HOST or the default socket), start
# uses it unchanged and stop does nothing. Otherwise it installs Debian's docker.io
# and runs a private dockerd for the run: its own data root (_out/kind/docker),
# exec root, socket, pidfile and bridge, no iptables rules and no IP forwarding
# on the host (kind's nodes reach each other on their own bridge; nothing is
# routed off the machine). When `docker run --privileged` fails because this
# machine's root lacks CAP_SYS_RESOURCE (test machines of this project), the
# daemon is restarted with runc behind e2e/kind/runc-wrapper, which removes that
# one capability from what a container asks for. That is for test machines only.
set -euo pipefail
cd "${0%/*}/../.."
top=$PWD

state=$top/_out/kind
run=/run/renumber-docker
sock=$run/docker.sock
pidfile=$run/dockerd.pid
bridge=rnb-docker0

log() { echo "engine: $*" >&2; }

answers() { docker info >/dev/null 2>&1; }

ensure_packages() {
	command -v dockerd >/dev/null 2>&1 && command -v jq >/dev/null 2>&1 && [ -x /bin/busybox ] && return
	log "installing Debian's docker.io"
	apt-get update -qq
	RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io jq busybox-static >/dev/null
}

# dockerd_start [runtime-args...]: the private daemon, waited for.
dockerd_start() {
	mkdir -p "$state/docker" "$run"
	# Its own bridge: never --bridge=none (it would delete the host's docker0),
	# never the host's docker0 either.
	ip link show "$bridge" >/dev/null 2>&1 || {
		ip link add "$bridge" type bridge
		ip addr add 10.213.0.1/24 dev "$bridge"
		ip link set "$bridge" up
	}
	setsid dockerd --data-root "$state/docker" --exec-root "$run/exec" \
		--host "unix://$sock" --pidfile "$pidfile" -b "$bridge" \
		--iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
		--storage-driver overlay2 --log-level warn "$@" \
		>"$state/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 100); do
		DOCKER_HOST=unix://$sock docker info >/dev/null 2>&1 && return
		sleep 0.2
	done
	log "the private dockerd did not answer; its log:"
	tail -20 "$state/dockerd.log" >&2
	return 1
}

dockerd_stop() {
	[ -f "$pidfile" ] || return 0
	local pid
	pid=$(cat "$pidfile")
	# A pidfile left by a daemon that died names whatever has that PID now.
	if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != dockerd ]; then
		rm -f "$pidfile"
		return 0
	fi
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$pidfile"
}

# privileged_works: kind's nodes are privileged containers. The probe image is
# Debian's static busybox, imported (nothing is pulled).
privileged_works() {
	export DOCKER_HOST=unix://$sock
	if ! docker image inspect renumber/probe:dev >/dev/null 2>&1; then
		[ -x /bin/busybox ] || RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static >/dev/null
		local root
		root=$(mktemp -d)
		mkdir -p "$root/bin"
		cp /bin/busybox "$root/bin/" && ln -s busybox "$root/bin/true" && ln -s busybox "$root/bin/sh"
		tar -C "$root" -c . | docker import - renumber/probe:dev >/dev/null
		rm -rf "$root"
	fi
	docker run --rm --privileged renumber/probe:dev true >"$state/probe.log" 2>&1
}

start() {
	if answers; then
		log "using the Docker that answers (${DOCKER_HOST:-default socket})"
		echo "DOCKER_HOST=${DOCKER_HOST:-}"
		return
	fi
	ensure_packages
	mkdir -p "$state"
	dockerd_stop
	dockerd_start
	if ! privileged_works; then
		log "docker run --privileged fails here (no CAP_SYS_RESOURCE for root): registering runc-wrapper"
		dockerd_stop
		dockerd_start --add-runtime "renumber-runc=$top/e2e/kind/runc-wrapper" --default-runtime renumber-runc
		privileged_works || { log "docker run --privileged fails with the wrapper too"; return 1; }
	fi
	echo "DOCKER_HOST=unix://$sock"
}

stop() {
	[ -f "$pidfile" ] || return 0
	dockerd_stop
	ip link del "$bridge" 2>/dev/null || true
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
