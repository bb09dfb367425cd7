#!/usr/bin/env bash
# make e2e-kind: the e2e scenarios against a kind cluster (1 control plane + 2
# workers) with the project's images, its manifests, Cilium's CRDs and radvd in
# a container on the kind network as the router. Needs Docker; kind itself is
# built from the module proxy (tools/kind). KEEP=1 leaves the cluster running.
set -euo pipefail
cd "${0%/*}/../.."

KIND=${KIND:-$PWD/_out/bin/kind}
CLUSTER=renumber
ROUTER=renumber-router

fail() { echo "e2e-kind: $*" >&2; exit 2; }

command -v docker >/dev/null 2>&1 || fail "Docker is required and there is no docker command here. The same scenarios run without Docker in the local world: make e2e"
docker info >/dev/null 2>&1 || fail "the docker command is here but its daemon does not answer (docker info failed). Start Docker, or run the local world: make e2e"
command -v kubectl >/dev/null 2>&1 || fail "kubectl is required"
[ -x "$KIND" ] || fail "no kind binary at $KIND (make e2e-kind builds it)"

cleanup() {
	if [ -z "${KEEP:-}" ]; then
		docker rm -f "$ROUTER" >/dev/null 2>&1 || true
		"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

echo "== images"
docker build -q -f Dockerfile.agent -t renumber/agent:dev .
docker build -q -f Dockerfile.writer -t renumber/writer:dev .
docker build -q -f e2e/kind/Dockerfile.router -t renumber/e2e-router:dev .

echo "== cluster"
"$KIND" create cluster --name "$CLUSTER" --config e2e/kind/kind-config.yaml --wait 180s
KUBECONFIG=$(mktemp)
export KUBECONFIG
"$KIND" get kubeconfig --name "$CLUSTER" >"$KUBECONFIG"
"$KIND" load docker-image --name "$CLUSTER" renumber/agent:dev renumber/writer:dev

# kind nodes forward IPv6 (kube-proxy), so the kernel ignores RAs unless
# accept_ra is 2: set it so nodes form SLAAC addresses as a home LAN's hosts do.
for node in $("$KIND" get nodes --name "$CLUSTER"); do
	docker exec "$node" sysctl -qw net.ipv6.conf.eth0.accept_ra=2 net.ipv6.conf.eth0.autoconf=1
done

echo "== router"
docker rm -f "$ROUTER" >/dev/null 2>&1 || true
docker run -d --name "$ROUTER" --network kind --cap-add NET_ADMIN --cap-add NET_RAW \
	--sysctl net.ipv6.conf.all.forwarding=1 renumber/e2e-router:dev >/dev/null

echo "== CRDs and manifests"
crds="$(go list -m -f '{{.Dir}}' github.com/cilium/cilium)/pkg/k8s/apis/cilium.io/client/crds/v2"
kubectl apply -f "$crds/ciliumloadbalancerippools.yaml" -f "$crds/ciliumcidrgroups.yaml" -f "$crds/ciliumbgpadvertisements.yaml"
kubectl wait --for condition=established --timeout=60s crd/ciliumloadbalancerippools.cilium.io
kubectl apply -k manifests/
kubectl -n renumber-system rollout status daemonset/renumber-agent --timeout=180s
kubectl -n renumber-system rollout status deployment/renumber-writer --timeout=180s

echo "== scenarios"
E2E_KIND_CLUSTER=$CLUSTER E2E_KIND_ROUTER=$ROUTER \
	go test -tags kind -count=1 -v -timeout 60m ./e2e/kind/
