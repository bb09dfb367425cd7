# renumber - keep Cilium's IPv6 pools in step with a changing ISP prefix.
# `make help` lists the targets.

SHELL := /bin/bash
OUT   := $(CURDIR)/_out
BIN   := $(OUT)/bin
GO    ?= go
# World tests run side by side, each in its own world (e2e/harness_test.go);
# they wait on routers and timers far more than they compute.
E2E_PARALLEL ?= 8
# Fixed so CI's fresh clone reuses Go's build cache (a cold API server build is ~6 min).
export CGO_ENABLED := 0

APISERVER := $(BIN)/kube-apiserver
# The oldest Kubernetes the chart claims (Chart.yaml kubeVersion): the CRD and
# the admission policies are applied to it in make test (TestTheOldestKubernetesTheChartClaims).
OLDEST_APISERVER := $(BIN)/kube-apiserver-1.30
ETCD      := $(BIN)/etcd
KIND      := $(BIN)/kind
LBIPAM    := $(BIN)/lbipam
CILIUMGW  := $(BIN)/ciliumgw
STATICCHECK := $(BIN)/staticcheck
HELM        := $(BIN)/helm
# Prometheus for the scrape test (Debian's is built without Kubernetes discovery).
PROMETHEUS  := $(BIN)/prometheus
ACTIONLINT  := $(BIN)/actionlint
STATICCHECK_VERSION := v0.7.0
# Real nodes in the test world (../shared/notes/nodeworld.md): built from the
# module proxy like the API server (tools/kube: containerd is pinned there), cached in _out/bin.
KUBE_VERSION       := v1.35.4
RUNC_VERSION       := v1.3.2
CNI_VERSION        := v1.8.0
KUBELET            := $(BIN)/kubelet
CONTAINERD         := $(BIN)/containerd
RUNC               := $(BIN)/runc
CNI                := $(BIN)/cni/portmap
# Without these the API server and nodes report v0.0.0-master (and Helm refuses
# a chart requiring Kubernetes 1.30+).
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35
APT_PACKAGES := radvd iproute2 ndisc6 tcpdump procps prometheus shellcheck isc-dhcp-server isc-dhcp-client libseccomp-dev gcc libc6-dev util-linux iptables bind9 bind9-utils bind9-dnsutils

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install the Debian packages tests need (radvd, iproute2, promtool, ...); starts no service
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

$(OLDEST_APISERVER): tools/kube-apiserver-1.30/go.mod tools/kube-apiserver-1.30/go.sum tools/kube-apiserver-1.30/main.go
	@echo "building kube-apiserver v1.30 (cold: ~3 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/kube-apiserver-1.30 && $(GO) build -trimpath -tags providerless \
		-ldflags="-X k8s.io/component-base/version.gitVersion=v1.30.14 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=30" -o $@ .

# The test world's Kubernetes and everything around it come from one module,
# tools/kube (one version of each shared dependency, compiled once), in one go
# build per make target so the links run side by side.
KUBE_MOD  := tools/kube/go.mod tools/kube/go.sum
# Built with `tools`: the API server, etcd, CoreDNS (the DNS source's name
# servers; kind's too) and Helm (the chart tests).
$(APISERVER) $(ETCD) $(BIN)/coredns $(HELM) &: $(KUBE_MOD) tools/kube/kube-apiserver/main.go tools/kube/etcd/main.go tools/kube/coredns/main.go
	@echo "building kube-apiserver, etcd, coredns, helm (cold: ~5 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/kube && $(GO) build -trimpath -ldflags="-s $(KUBE_LDFLAGS)" -o $(BIN)/ \
		./kube-apiserver ./etcd ./coredns helm.sh/helm/v3/cmd/helm

# Cilium's own LB-IPAM (the cilium-operator cell) for the test world: the real
# consumer of our pools and Service annotations.
$(LBIPAM): tools/lbipam/go.mod tools/lbipam/go.sum tools/lbipam/main.go
	@echo "building Cilium's LB-IPAM (cold: ~2.5 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/lbipam && $(GO) build -trimpath -o $@ .

# Cilium's own Gateway API controller (the cilium-operator cell) for the test
# world: the real translation of the Gateways renumber writes
# (TestCiliumsGatewayControllerFollows; skipped until built). Cold: ~15 min of
# CPU on a loaded machine, so make e2e builds it and make test does not.
$(CILIUMGW): tools/ciliumgw/go.mod tools/ciliumgw/go.sum tools/ciliumgw/main.go tools/ciliumgw/mcsstub/controllers.go
	@echo "building Cilium's Gateway API controller (cold: ~15 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/ciliumgw && $(GO) build -trimpath -o $@ .

.PHONY: ciliumgw
ciliumgw: $(CILIUMGW) ## Build Cilium's Gateway API controller for the Gateway world test

# external-dns for the DNS world (TestDigAnswersTheRenumberedService): the
# releases on either side of v0.22, which moved every annotation from
# external-dns.alpha.kubernetes.io/ to external-dns.kubernetes.io/ (v0.21.0 is
# the last reading the alpha keys). v0.21.0's go.mod has no replace
# directives, so go install builds it from the module proxy as runc's is;
# v0.22.0 needs tools/external-dns-v0.22 (the proxy refuses two of its
# dependencies). v0.23.0 needs Go 1.27 (its go.mod), newer than this
# repository's toolchain. Each links every provider's SDK and shares little
# with the other (their dependencies' versions differ). Measured with an empty
# build cache on 2 shared cores: v0.21.0 10 min of CPU, 2.0 GB peak, 1.9 GB of
# cache, 138 MB; v0.22.0 after it 12 min of CPU, 2.4 GB peak, 2.1 GB more
# cache, 163 MB; a warm rebuild (the relink) ~16 s.
EXTERNAL_DNS_LDFLAGS = -s -X sigs.k8s.io/external-dns/pkg/apis/externaldns.Version=$*
EXTERNAL_DNS := $(BIN)/external-dns-v0.21.0 $(BIN)/external-dns-v0.22.0
$(BIN)/external-dns-v0.21.0: $(BIN)/external-dns-%:
	@echo "building external-dns $* (cold: ~10-12 min CPU, cached afterwards)"
	@mkdir -p $(BIN)/.external-dns-$* && GOBIN=$(BIN)/.external-dns-$* $(GO) install -trimpath \
		-ldflags="$(EXTERNAL_DNS_LDFLAGS)" sigs.k8s.io/external-dns@$* && \
		mv $(BIN)/.external-dns-$*/external-dns $@ && rmdir $(BIN)/.external-dns-$*
$(BIN)/external-dns-v0.22.0: $(BIN)/external-dns-%: tools/external-dns-v0.22/go.mod tools/external-dns-v0.22/go.sum
	@echo "building external-dns $* (cold: ~10-12 min CPU, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/external-dns-v0.22 && $(GO) build -trimpath -ldflags="$(EXTERNAL_DNS_LDFLAGS)" -o $@ sigs.k8s.io/external-dns

.PHONY: external-dns
external-dns: $(EXTERNAL_DNS) ## Build the pinned external-dns releases (v0.21.0, the last reading the alpha annotation keys, and v0.22.0) for the DNS world test

$(KIND): tools/kind/go.mod tools/kind/go.sum tools/kind/main.go
	@mkdir -p $(BIN) && cd tools/kind && $(GO) build -trimpath -o $@ .

.PHONY: helm
helm: $(HELM) ## Build the pinned Helm (charts/renumber is linted and rendered with it in make test)

# Only Kubernetes service discovery (Prometheus's own build tags): the other
# discovery plugins would bring ~80 MB more source to compile (cloud SDKs).
$(PROMETHEUS): $(KUBE_MOD)
	@echo "building prometheus (cold after the API server: ~3 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/kube && $(GO) build -trimpath -tags remove_all_sd,enable_kubernetes_sd -o $@ github.com/prometheus/prometheus/cmd/prometheus

$(ACTIONLINT): tools/actionlint/go.mod tools/actionlint/go.sum
	@mkdir -p $(BIN) && cd tools/actionlint && $(GO) build -trimpath -o $@ github.com/rhysd/actionlint/cmd/actionlint

$(STATICCHECK):
	@mkdir -p $(BIN) && GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# The real nodes' parts. CGO_ENABLED=0 leaves containerd's btrfs snapshotter out.
$(KUBELET) $(CONTAINERD) &: $(KUBE_MOD) $(foreach c,kubelet kube-controller-manager kube-scheduler,tools/kube/$(c)/main.go)
	@echo "building kubelet, kube-controller-manager, kube-scheduler $(KUBE_VERSION), containerd (cold after the API server: ~2 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/kube && $(GO) build -trimpath -ldflags="-s $(KUBE_LDFLAGS)" -o $(BIN)/ \
		./kubelet ./kube-controller-manager ./kube-scheduler \
		github.com/containerd/containerd/v2/cmd/containerd \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		github.com/containerd/containerd/v2/cmd/ctr

# runc needs cgo and libseccomp (libseccomp-dev, in make deps).
$(RUNC):
	@mkdir -p $(BIN) && GOBIN=$(BIN) CGO_ENABLED=1 $(GO) install -trimpath -tags seccomp github.com/opencontainers/runc@$(RUNC_VERSION)

$(CNI):
	@mkdir -p $(BIN)/cni && GOBIN=$(BIN)/cni $(GO) install -trimpath \
		github.com/containernetworking/plugins/plugins/main/bridge@$(CNI_VERSION) \
		github.com/containernetworking/plugins/plugins/main/loopback@$(CNI_VERSION) \
		github.com/containernetworking/plugins/plugins/main/ptp@$(CNI_VERSION) \
		github.com/containernetworking/plugins/plugins/meta/portmap@$(CNI_VERSION) \
		github.com/containernetworking/plugins/plugins/ipam/host-local@$(CNI_VERSION)

# The offline kind node image (tools/kind/node-image.sh): the node's other
# Kubernetes binaries, CoreDNS, the Pod network's stand-in for kindnetd, and a
# Debian rootfs laid out as kind's base image. Cached in _out/ and in the
# private Docker daemon's data root (_out/kind/docker).
KIND_NODE_IMAGE := renumber/kind-node:$(KUBE_VERSION)
KIND_NODE_BINS  := $(BIN)/kubeadm $(BIN)/kube-proxy $(BIN)/kubectl
$(KIND_NODE_BINS) &: $(KUBE_MOD) tools/kube/kubeadm/main.go tools/kube/kube-proxy/main.go tools/kube/kubectl/main.go
	@echo "building kubeadm, kube-proxy, kubectl $(KUBE_VERSION) (cold after the node tools: ~2 min, cached afterwards)"
	@mkdir -p $(BIN) && cd tools/kube && $(GO) build -trimpath -ldflags="-s $(KUBE_LDFLAGS)" -o $(BIN)/ ./kubeadm ./kube-proxy ./kubectl

.PHONY: $(BIN)/kindnet $(BIN)/pause
$(BIN)/kindnet:
	@mkdir -p $(BIN) && $(GO) build -trimpath -ldflags=-s -o $@ ./tools/kindnet
$(BIN)/pause:
	@mkdir -p $(BIN) && cd tools/images && $(GO) build -trimpath -ldflags=-s -o $@ ./pause

$(OUT)/kind/rootfs.tar:
	@command -v mmdebstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; }
	@mkdir -p $(OUT)/kind && mmdebstrap --quiet --variant=minbase --format=tar \
		--include=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,ca-certificates,curl,jq,procps,bash \
		bookworm $@.tmp && mv $@.tmp $@

# BuildKit's Dockerfile frontend: the docker/dockerfile:1 the Dockerfiles'
# syntax line names, where it cannot be pulled (e2e/kind/images.sh).
BUILDKIT_VERSION := v0.12.5
$(BIN)/dockerfile-frontend:
	@mkdir -p $(BIN) && GOBIN=$(BIN) $(GO) install -trimpath -ldflags=-s github.com/moby/buildkit/frontend/dockerfile/cmd/dockerfile-frontend@$(BUILDKIT_VERSION)

.PHONY: kind-node-image
kind-node-image: $(KUBELET) $(APISERVER) $(ETCD) $(CONTAINERD) $(RUNC) $(CNI) $(KIND_NODE_BINS) $(BIN)/coredns $(BIN)/kindnet $(BIN)/pause $(OUT)/kind/rootfs.tar ## The kind node image, built offline (Docker or the private engine of e2e/kind/engine.sh)
	@eval "$$(e2e/kind/engine.sh start)" && export DOCKER_HOST && \
		tools/kind/node-image.sh $(KIND_NODE_IMAGE) $(BIN) $(OUT)/kind/rootfs.tar $(KUBE_VERSION); \
		rc=$$?; e2e/kind/engine.sh stop; exit $$rc

.PHONY: node-tools
node-tools: $(KUBELET) $(CONTAINERD) $(RUNC) $(CNI) ## Build the real nodes' parts: kubelet, controller manager, scheduler, containerd, runc, CNI plugins

.PHONY: tools
tools: $(APISERVER) $(OLDEST_APISERVER) $(ETCD) $(LBIPAM) $(HELM) $(PROMETHEUS) $(BIN)/coredns ## Build the pinned API server (and the oldest supported, 1.30), etcd, Cilium's LB-IPAM (the test world), Helm (the chart tests), Prometheus (the scrape test) and CoreDNS (the DNS source's name servers; kind's too)

# Static, without cgo, as the Dockerfiles build them: the benchmarks measure what ships.
.PHONY: build
build: ## Build the agent, the writer, kubectl-renumber (also renumber-status) and worldctl into _out/bin
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -o $(BIN)/agent ./agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -o $(BIN)/writer ./writer
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -o $(BIN)/kubectl-renumber ./writer/kubectl-renumber
	ln -sf kubectl-renumber $(BIN)/renumber-status
	$(GO) build -trimpath -o $(BIN)/worldctl ./tools/worldctl

IMAGE_VERSION ?= dev
PLATFORMS     := linux/amd64 linux/arm64

# Reproducible: the same commit gives the same digests (SOURCE_DATE_EPOCH is the
# commit's time, binaries carry no build ID).
.PHONY: images
images: ## OCI image tarballs of agent and writer (linux/amd64 + arm64, one index each) in _out/images, without Docker
	@mkdir -p $(OUT)/images
	@export SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0); rev=$$(git rev-parse HEAD 2>/dev/null); \
	for cmd in agent writer; do \
		args=""; \
		for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; bin=$(OUT)/images/$$cmd-$$os-$$arch; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags="-s -w -buildid=" -o $$bin ./$$cmd || exit 1; \
			args="$$args -bin $$p=$$bin"; \
		done; \
		cap=""; if [ $$cmd = agent ]; then cap=-agent-caps; fi; \
		(cd tools/images && $(GO) run . -name $$cmd $$cap $$args -version $(IMAGE_VERSION) -revision "$$rev" -out $(OUT)/images/$$cmd.oci.tar) || exit 1; \
	done

# The real nodes' sandbox image: a static pause (tools/images/pause), never shipped.
.PHONY: node-images
node-images: ## The sandbox (pause) image the test world's real nodes run Pods with, in _out/images
	@mkdir -p $(OUT)/images && cd tools/images && args=""; \
	for p in $(PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; bin=$(OUT)/images/pause-$$os-$$arch; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags="-s -w -buildid=" -o $$bin ./pause || exit 1; \
		args="$$args -bin $$p=$$bin"; \
	done; \
	SOURCE_DATE_EPOCH=0 $(GO) run . -name pause $$args -version dev -out $(OUT)/images/pause.oci.tar

# The tests with real nodes (named TestRealNodes...) run alone; then the world
# tests run beside each other, and kind's tools and the smoke's images build
# beside them at the lowest CPU priority (the worlds wait on routers and timers
# far more than they compute; the builds take what they leave). The kind smoke
# runs last, alone: tried 27 Nov, beside go test the load of a kind cluster
# starting failed TestRealNodes' quiet period.
REAL_NODES := ^TestRealNodes
# make test's real nodes import the images for this machine's platform only:
# the other platform's cross-build is the release's, not the tests'.
test: PLATFORMS = linux/$(shell $(GO) env GOARCH)
.PHONY: test
test: deps tools node-tools build images node-images ## Unit tests, fuzz seeds, the world tests, the fast e2e subset and the kind smoke (needs root; ~18 min warm, 37 cold, measured)
	$(GO) vet ./... && $(GO) vet -tags kind ./e2e/kind/
	cd tools/kind && $(GO) test -count=1 ./...
	cd tools/images && $(GO) test -count=1 ./...
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/e2e$$')
	$(GO) test -count=1 -timeout 30m -run '$(REAL_NODES)' ./e2e
	@echo "make kind-tools kind-images at nice 19 beside the world tests (log: $(OUT)/kind-build.log)"; \
	nice -n 19 $(MAKE) --no-print-directory kind-tools kind-images >$(OUT)/kind-build.log 2>&1 & kind=$$!; \
	$(GO) test -count=1 -parallel $(E2E_PARALLEL) -timeout 60m -skip '$(REAL_NODES)' ./e2e; rc=$$?; \
	if ! wait $$kind; then tail -n 40 $(OUT)/kind-build.log; echo "make kind-tools kind-images failed: $(OUT)/kind-build.log"; exit 1; fi; \
	exit $$rc
	SMOKE=1 e2e/kind/run.sh

.PHONY: e2e
e2e: deps tools node-tools $(EXTERNAL_DNS) $(CILIUMGW) build images node-images ## Every e2e scenario in the local world, the long ones too (5 quiet minutes, a 90 s stall, real nodes after helm install, the DNS world with both external-dns releases; ~40 min, and ~22 min CPU once to build external-dns)
	E2E_FULL=1 $(GO) test -count=1 -p 1 -parallel $(E2E_PARALLEL) -timeout 80m ./e2e/

# kind (e2e/kind/run.sh): Docker if one answers, else a private dockerd from
# Debian's docker.io (e2e/kind/engine.sh); the node image built offline; the
# images from the Dockerfiles, on stand-ins for base images that cannot be pulled.
.PHONY: kind-tools
kind-tools: deps $(KIND) $(HELM) $(BIN)/dockerfile-frontend kind-node-image ## Build what the kind e2e needs: kind, Helm, the Dockerfile frontend, the node image

.PHONY: e2e-kind
e2e-kind: kind-tools ## Every e2e scenario on a 3-node kind cluster, installed with helm and with kubectl apply -k (~23 min warm)
	e2e/kind/run.sh

.PHONY: kind-images
kind-images: kind-tools ## The kind e2e's images, built from the Dockerfiles and cached in the engine (e2e/kind/images.sh)
	IMAGES=only e2e/kind/run.sh

.PHONY: e2e-kind-smoke
e2e-kind-smoke: kind-tools ## The kind smoke of make test: cluster, helm install of the packaged chart, first RA, one renumbering
	SMOKE=1 e2e/kind/run.sh

.PHONY: unit
unit: ## Unit tests only (no root, no world)
	$(GO) test -count=1 -short ./...

.PHONY: fuzz
fuzz: ## Fuzz every decoder of outside input for FUZZTIME each (default 30s; a new input minimised for FUZZMINTIME, 5s: Go's 60s left FuzzBallot idle)
	@for f in $$(git ls-files '*_test.go' | xargs grep -hoE '^func Fuzz[A-Za-z0-9_]+' | sed 's/func //' | sort -u); do \
		pkg=./$$(git ls-files '*_test.go' | xargs grep -lE "^func $$f\(" | head -1 | xargs dirname); \
		echo "fuzz $$f in $$pkg"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} -fuzzminimizetime $${FUZZMINTIME:-5s} $$pkg || exit 1; \
	done

.PHONY: lint
lint: $(STATICCHECK) $(ACTIONLINT) ## go vet, staticcheck, shellcheck and actionlint (the release workflow)
	$(GO) vet ./...
	$(STATICCHECK) ./...
	shellcheck e2e/kind/*.sh e2e/kind/runc-wrapper tools/kind/node-image.sh .ci/run
	$(ACTIONLINT) .github/workflows/*.yml

.PHONY: chart-files
chart-files: ## Copy the manifests the chart embeds into charts/renumber/files (manifests/ is their source; a test keeps them equal)
	$(GO) run ./tools/chartfiles

.PHONY: chart-readme
chart-readme: ## Write charts/renumber/README.md from the chart's values.schema.json and values.yaml
	$(GO) run ./tools/chartdoc

.PHONY: world-up
world-up: deps tools build $(if $(KUBELET),node-tools images node-images helm) ## Start a test world (NODES=3) in the background; KUBELET=1: real nodes running the install (INSTALL=kustomize|helm)
	@$(BIN)/worldctl up --nodes $${NODES:-3} $(if $(KUBELET),--kubelets --install $${INSTALL:-kustomize})

.PHONY: world-down
world-down: ## Tear down every test world, even after a crashed test
	@$(GO) run ./tools/worldctl down

.PHONY: demo
demo: deps tools build ## The main job on the embedded default: a prefix change flowing through
	@$(GO) run ./tools/demo

.PHONY: clean
clean: world-down ## Remove built binaries (keeps Go's caches)
	rm -rf $(OUT)

.PHONY: bench
bench: deps tools build ## Measure writes, change latency, memory, sizes, a rotation soak, an RA flood, the DNS source and the router's change to BIND's answer into bench/results.md (BENCH=steady|change|scale|size|soak|burst|flood|scrape|idle|dns|answer; answer needs make external-dns; writes, memory, latency are aliases, STEADY=10m, CHANGES=20, ROUTER_ANSWERS=unicast|multicast|both, CORROBORATION=250ms (the agents' margin), RA_INTERVALS=3-4 (radvd's, s; its default 198-600), SCALE=1000,5000, RUNS=3, SOAK=200, FLOOD=1m, DNS=2m, IDLE=5000)
	$(GO) run ./tools/bench -only "$(BENCH)" -steady $${STEADY:-10m} -changes $${CHANGES:-20} -router-answers $${ROUTER_ANSWERS:-both} -corroboration "$${CORROBORATION:-}" -ra-intervals $${RA_INTERVALS:-3-4} -scale $${SCALE:-1000,5000} -runs $${RUNS:-3} -soak $${SOAK:-200} -flood $${FLOOD:-1m} -dns $${DNS:-2m} -idle $${IDLE:-5000} -out bench
	$(GO) test -run XXX -bench . -benchmem ./internal/agent/ra ./internal/agent/observe ./internal/digest | tee bench/microbench.txt
