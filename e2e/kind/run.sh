#!/usr/bin/env bash
# make e2e-kind: the e2e scenarios on a kind cluster (1 control plane + 2
# workers on the dual-stack kind network) with radvd in a container on that
# network as the router, the API server's audit log counting writes per Pod
# identity.
#
#   e2e/kind/run.sh               every scenario, installed with helm and with kubectl apply -k
#   SMOKE=1 e2e/kind/run.sh       the smoke of make test: helm install, first RA, one renumbering
#   IMAGES=only e2e/kind/run.sh   only the images (make kind-images), cached in the engine
#   KEEP=1                        leave the cluster (and the private engine) running
#
# With a Docker that answers, it is used unchanged; without one,
# e2e/kind/engine.sh runs a private dockerd from Debian's docker.io. The node
# image is built offline (make kind-node-image), kind from the module proxy
# (tools/kind), the images of renumber from its Dockerfiles.
set -euo pipefail
cd "${0%/*}/../.."
top=$PWD

BIN=${BIN:-$top/_out/bin}
KIND=${KIND:-$BIN/kind}
KUBE_VERSION=${KUBE_VERSION:-v1.35.4}
NODE_IMAGE=${NODE_IMAGE:-renumber/kind-node:$KUBE_VERSION}
CLUSTER=renumber
ROUTER=renumber-router
# The chart as release.yml packages it, at a version no release has.
CHART_VERSION=0.0.0-kind
export PATH=$BIN:$PATH

fail() { echo "e2e-kind: $*" >&2; exit 2; }
step() { echo "== $* ($(date +%T))"; }

[ -x "$KIND" ] || fail "no kind binary at $KIND (make e2e-kind builds it)"
eval "$(e2e/kind/engine.sh start)"
export DOCKER_HOST

docker image inspect "$NODE_IMAGE" >/dev/null 2>&1 || fail "no node image $NODE_IMAGE (make kind-node-image builds it)"

# Kubelets inside the nodes change host-global sysctls, as the test world's
# real nodes do (tools/world/kubelet.go), and this smoke may run beside go test
# (make test runs it after; a user may start both): both keep the machine's values in $worlds/sysctls.json (whoever
# starts first records them), and the last one out puts them back.
worlds=/run/renumber-world
sysctls="vm.overcommit_memory kernel.panic kernel.panic_on_oops"
kubelets=""
KUBECONFIG=$(mktemp)
export KUBECONFIG
plugin=$(mktemp -d) # the README's go install puts kubectl-renumber here
cleanup() {
	local rc=$?
	if [ -z "${KEEP:-}" ]; then
		docker rm -f "$ROUTER" "$ROUTER-rogue" >/dev/null 2>&1 || true
		"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
		e2e/kind/engine.sh stop
	fi
	if [ -n "$kubelets" ]; then
		if ! compgen -G "/sys/fs/cgroup/pids/rn*-node*" >/dev/null && [ -f "$worlds/sysctls.json" ]; then
			local kv
			for kv in $(jq -r 'to_entries[] | "\(.key)=\(.value)"' "$worlds/sysctls.json"); do sysctl -qw "$kv"; done
			rm -f "$worlds/sysctls.json"
		fi
	fi
	rm -rf "$KUBECONFIG" "$plugin"
	exit $rc
}
trap cleanup EXIT

step "images"
e2e/kind/images.sh "$CHART_VERSION"
[ "${IMAGES:-}" != only ] || exit 0

# Held for the cluster's life: worlds that end meanwhile leave the sysctls to
# this script. A test that compares the machine's sysctls before and after
# holds it too (world.HoldKubeletsLock): the cluster waits for it, and it for
# the cluster.
mkdir -p "$worlds"
exec {lock}>"$worlds/kubelets.lock"
if ! flock -n "$lock"; then
	step "waiting for a test of the machine's sysctls to finish"
	flock "$lock"
fi
kubelets=1
if [ ! -f "$worlds/sysctls.json" ]; then
	json='{}'
	for s in $sysctls; do json=$(jq -c --arg k "$s" --arg v "$(sysctl -n "$s")" '. + {($k): $v}' <<<"$json"); done
	echo "$json" >"$worlds/sysctls.json"
fi

step "cluster"
"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
"$KIND" create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config e2e/kind/kind-config.yaml --wait 180s
"$KIND" get kubeconfig --name "$CLUSTER" >"$KUBECONFIG"
# CoreDNS is built with only the plugins kubeadm's Corefile names
# (tools/kube/coredns): it must serve the cluster, not crash on its config.
kubectl -n kube-system rollout status deployment/coredns --timeout=180s
# The smoke installs the images make images built, as the README says: the
# engine's renumber/*:dev stay out of the nodes so nothing else answers to
# those names.
dev=(renumber/agent:dev renumber/writer:dev)
[ -z "${SMOKE:-}" ] || dev=()
"$KIND" load docker-image --name "$CLUSTER" "${dev[@]}" \
	"ghcr.io/renumber/renumber-agent:$CHART_VERSION" "ghcr.io/renumber/renumber-writer:$CHART_VERSION"

# kind nodes forward IPv6 (kube-proxy), so the kernel ignores RAs unless
# accept_ra is 2: set it so nodes form SLAAC addresses as a home LAN's hosts do.
for node in $("$KIND" get nodes --name "$CLUSTER"); do
	docker exec "$node" sysctl -qw net.ipv6.conf.eth0.accept_ra=2 net.ipv6.conf.eth0.autoconf=1
done

# router: radvd on the kind network, advertising prefix A (e2e/kind/radvd.conf).
router() {
	docker rm -f "$ROUTER" >/dev/null 2>&1 || true
	docker run -d --name "$ROUTER" --network kind --cap-add NET_ADMIN --cap-add NET_RAW \
		--sysctl net.ipv6.conf.all.forwarding=1 renumber/e2e-router:dev >/dev/null
}
step "router"
router

step "Cilium's CRDs"
crds="$(go list -m -f '{{.Dir}}' github.com/cilium/cilium)/pkg/k8s/apis/cilium.io/client/crds/v2"
kubectl apply -f "$crds/ciliumloadbalancerippools.yaml" -f "$crds/ciliumcidrgroups.yaml" -f "$crds/ciliumbgpadvertisements.yaml" >/dev/null
kubectl wait --for condition=established --timeout=60s crd/ciliumloadbalancerippools.cilium.io >/dev/null

# install helm|kustomize: renumber as a user installs it, waited for.
install() {
	case $1 in
	helm)
		local pkg
		pkg=$(mktemp -d)
		helm package charts/renumber --version "$CHART_VERSION" --app-version "$CHART_VERSION" -d "$pkg" >/dev/null
		kubectl create namespace renumber-system >/dev/null
		kubectl label namespace renumber-system pod-security.kubernetes.io/enforce=privileged >/dev/null
		helm install renumber "$pkg/renumber-$CHART_VERSION.tgz" -n renumber-system \
			--set agent.interface=eth0 --set writer.pdb.enabled=false --wait --timeout 180s >/dev/null
		rm -rf "$pkg"
		;;
	readme)
		# The README's "Try it from source" block as a kind user runs it: its
		# kind, kubectl, helm and go lines, continuation lines joined and
		# comments dropped (its ctr and skopeo lines are other clusters' ways;
		# make images ran before make test got here; the example's IPv4 block
		# is a placeholder, so the scenarios make their own objects).
		local line
		while IFS= read -r line; do
			step "README: $line"
			eval "$line" >/dev/null
		done < <(readme_from_source)
		kubectl -n renumber-system rollout status daemonset/renumber-agent --timeout=180s
		kubectl -n renumber-system rollout status deployment/renumber-writer --timeout=180s
		;;
	kustomize)
		kubectl apply -k manifests/ >/dev/null
		kubectl -n renumber-system rollout status daemonset/renumber-agent --timeout=180s
		kubectl -n renumber-system rollout status deployment/renumber-writer --timeout=180s
		;;
	esac
}
readme_from_source() {
	awk '/^Try it from source/ {f = 1} f && /^```sh/ {b = 1; next} b && /^```/ {exit} b' README.md |
		sed -e 's/[[:space:]]*#.*$//' | awk '/\\$/ {sub(/\\$/, ""); part = part $0; next} {print part $0; part = ""}' |
		grep -E '^(kind load|kubectl (create|label) namespace|helm install|go install)' |
		sed -e "s/<cluster>/$CLUSTER/g" -e "s|^go install |GOBIN=$plugin go install |"
}
uninstall() {
	case $1 in
	helm) helm uninstall renumber -n renumber-system --wait >/dev/null && kubectl delete namespace renumber-system --wait >/dev/null ;;
	kustomize) kubectl delete -k manifests/ --wait >/dev/null ;;
	esac
}

# reset: the next install starts from the first RA, as on a new cluster: the
# scenarios' objects gone (the CRD stays, as helm uninstall leaves it), the
# nodes without the SLAAC addresses of the prefixes the scenarios moved
# through (their lifetimes would outlast the next pass), the router back on A.
reset() {
	kubectl delete dynamicprefixes.dynamic-prefix.io --all --wait >/dev/null
	kubectl delete ciliumloadbalancerippools.cilium.io --all --wait >/dev/null
	local node
	for node in $("$KIND" get nodes --name "$CLUSTER"); do
		# shellcheck disable=SC2016 # expanded in the node
		docker exec "$node" sh -c 'for a in $(ip -6 -o addr show dev eth0 scope global | awk "{print \$4}" | grep "^2001:db8:"); do ip -6 addr del "$a" dev eth0; done'
	done
	router
}

scenarios() {
	E2E_KIND_CLUSTER=$CLUSTER E2E_KIND_ROUTER=$ROUTER E2E_KIND_INSTALL=$1 \
		go test -tags kind -count=1 -v -timeout 60m -run "${2:-.}" ./e2e/kind/
}

if [ -n "${SMOKE:-}" ]; then
	# The images built from the Dockerfiles start; the cluster runs the ones
	# make images built, loaded and installed as the README says.
	for image in renumber/agent:dev renumber/writer:dev; do
		docker run --rm --network none "$image" -version
	done
	step "smoke: install from source as the README says"
	install readme
	step "smoke: the stand-in base images, first RA, one renumbering"
	scenarios helm 'TestStandInBaseImages'
	scenarios helm 'TestScenarios/^(1_install|3_prefix_change)'
	step "smoke: the README's plugin"
	PATH=$plugin:$PATH kubectl renumber status
	exit 0
fi

first=yes
for how in helm kustomize; do
	# Between passes only: kubectl delete -k takes the CRD with it.
	[ -n "$first" ] || reset
	first=
	step "install with $how"
	install $how
	step "scenarios ($how)"
	scenarios $how
	step "uninstall ($how)"
	uninstall $how
done
