# draxr — build, test and benchmark targets. Everything runs from go.mod
# versions; nothing is downloaded besides Go modules.
GO ?= go
BIN := bin
PKGS := ./...
# Test builds honour DRAXR_VERIFY_SHORTCUTS (docs/shortcuts.md); shipped
# binaries, built without the tag, never read it.
TEST_TAGS := -tags draxrverify
BENCH_COUNT ?= 6
BENCH_PKGS ?= ./simulator/... ./autoscaler/...

.PHONY: kueue print-kueue-bin vet-tagged bench-live all build test test-unit test-race lint golangci-lint gofmt-check mocks mocks-check bench fmt vet example controlplane print-controlplane-dir cluster-up cluster-nodes cluster-kueue cluster-autoscaler cluster-down e2e-clusterapi fidelity e2e-bulk soak scheduler-perf images images-check manifests chart protos

# Control-plane binaries for end-to-end tests, built from the go.mod
# versions into an ignored cache folder; rebuilt only when versions change.
K8S_VERSION = $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
ETCD_VERSION = $(shell $(GO) list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
CONTROLPLANE_DIR = .cache/controlplane/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
VERSION_PKG = k8s.io/component-base/version
VERSION_LDFLAGS = -X $(VERSION_PKG).gitVersion=$(K8S_VERSION) \
	-X $(VERSION_PKG).gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION:v%=%))) \
	-X $(VERSION_PKG).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION:v%=%))) \
	-X $(VERSION_PKG).gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION)

all: build

# The shipped binaries, as the images hold them (IMAGE_CMDS below).
build:
	$(GO) build -o $(BIN)/ $(IMAGE_CMDS)

# OCI images of the shipped binaries, built offline: static binaries
# (CGO_ENABLED=0) packed with no base image by test/cmd/draxr-image into
# $(BIN)/images/oci (an OCI layout) and $(BIN)/images/NAME.tar (docker
# load, crane push, kind load image-archive). The tag is the chart's
# appVersion, so the chart's default images are these.
VERSION ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/draxr/Chart.yaml)
IMAGE_REGISTRY ?= draxr.dev
IMAGE_SOURCE ?= https://draxr.dev/draxr
IMAGE_CMDS = ./autoscaler/cmd/draxr ./autoscaler/cmd/draxr-autoscaler ./scheduler/cmd/draxr-scheduler ./kubelet/cmd/draxr-example-driver

images:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS) -X draxr.dev/draxr/scheduler/kubeversion.Release=$(VERSION)" -o $(BIN)/static/ $(IMAGE_CMDS)
	$(GO) run ./test/cmd/draxr-image -out $(BIN)/images -registry $(IMAGE_REGISTRY) -version $(VERSION) \
		-source $(IMAGE_SOURCE) $(addprefix $(BIN)/static/,$(notdir $(IMAGE_CMDS)))

# The plain manifests under */deploy are rendered from charts/draxr (the
# one source of their RBAC); the chart's copy of the scheduler
# configuration comes from scheduler/deploy. A test fails when stale.
# The shipped images, built and then read back (config, layers, static
# binaries); apart from make test, as the static build is a cache of its own.
images-check:
	DRAXR_IMAGES=1 $(GO) test ./test/images/ -run TestShippedImages -count=1 -v

manifests:
	DRAXR_UPDATE_MANIFESTS=1 $(GO) test ./test/chart/ -run TestPlainManifestsUpToDate -count=1

# The chart rendered as helm template would (schema and render-time checks
# included), to stdout or OUT; VALUES is a comma-separated list of values
# files, later ones win. NOTES go to stderr.
VALUES ?=
OUT ?=
RELEASE ?= draxr
NAMESPACE ?= kube-system
chart:
	@$(GO) run ./test/chart/cmd/render -f "$(VALUES)" -release $(RELEASE) -namespace $(NAMESPACE) $(if $(OUT),-o $(OUT))

example: build
	$(BIN)/draxr simulate

# The end-to-end tests need the control-plane binaries; building them here
# keeps a cold build out of go test's per-package timeout.
test: controlplane kueue
	$(GO) test $(TEST_TAGS) -count=1 -timeout 30m $(PKGS)

# The Cluster API suite alone (real CAPI controllers in process; make test
# runs it too); its last line is the suite's summary.
e2e-clusterapi: controlplane
	@mkdir -p $(BIN)
	@$(GO) test -count=1 -timeout 20m -v ./test/e2e/clusterapi/ > $(BIN)/e2e-clusterapi.log 2>&1; rc=$$?; \
	grep -E '^(--- |FAIL|ok )' $(BIN)/e2e-clusterapi.log; [ $$rc -eq 0 ] || echo "full log: $(BIN)/e2e-clusterapi.log"; \
	grep '^clusterapi e2e:' $(BIN)/e2e-clusterapi.log | tail -1; exit $$rc

# The fidelity oracle alone (make test runs it too): each scenario
# planned, then replayed on a control plane with draxr-scheduler; one line
# per scenario.
fidelity: controlplane
	$(GO) test $(TEST_TAGS) ./test/e2e/ -run TestFidelityOracle -count=1 -v -timeout 15m

# The 600-pod bulk scale-up end to end alone (make test runs it too); it
# logs the seconds from the first pending pod to the last bound one.
e2e-bulk: controlplane
	$(GO) test ./test/e2e/ -run 'TestAutoscalerBulkScaleUp$$' -count=1 -v -timeout 20m

# The soak: SOAK_DURATION of seeded random churn (Jobs, Deployments,
# extended resources, claims) and faults (SIGKILL, failover, API server
# restart, failing creates, never-Ready nodes) on a control plane, with
# an invariant checker throughout; it prints what it drove and every
# invariant with its count. CI runs SOAK_DURATION=3m. go test's timeout
# is off: the soak keeps its own, 20m past its duration.
SOAK_DURATION ?= 30m
SOAK_SEED ?= 1
SOAK_NODES ?= local
soak: controlplane
	DRAXR_SOAK_DURATION=$(SOAK_DURATION) DRAXR_SOAK_SEED=$(SOAK_SEED) DRAXR_SOAK_NODES=$(SOAK_NODES) \
		$(GO) test ./test/soak/ -run '^TestSoak$$' -count=1 -v -timeout 0

# Upstream scheduler_perf's DRA extended-resource workloads (read from the
# module cache) with the stock kube-scheduler and with draxr-scheduler's
# plugins, alternating which runs first, SCHEDULER_PERF_REPEAT runs each;
# one line per workload for throughput and one for the scheduler's CPU.
# SCHEDULER_PERF_SET=5000 runs the 5000-pod set.
# scheduler_perf starts its own etcd, found on PATH.
SCHEDULER_PERF_SET ?= 2000
SCHEDULER_PERF_REPEAT ?= 3
scheduler-perf: controlplane
	@mkdir -p $(BIN)
	@PATH="$(abspath $(CONTROLPLANE_DIR)):$$PATH" SCHEDULER_PERF_SET=$(SCHEDULER_PERF_SET) SCHEDULER_PERF_REPEAT=$(SCHEDULER_PERF_REPEAT) \
	$(GO) test -tags schedulerperf -run '^$$' -bench '^BenchmarkSchedulerPerf$$' -benchtime 1x -timeout 180m ./test/schedulerperf/ \
		> $(BIN)/scheduler-perf.log 2>&1; rc=$$?; \
	grep -E '^scheduler-perf(-cpu)? ' $(BIN)/scheduler-perf.log; \
	[ $$rc -eq 0 ] || { grep -E '^(--- FAIL|FAIL|panic)' $(BIN)/scheduler-perf.log; echo "full log: $(BIN)/scheduler-perf.log"; }; exit $$rc

# Live fleet benchmarks on the control plane with draxr-scheduler and the
# kwok controller (test/benchlive; not in make test): a scale-up from 0 to
# BENCH_LIVE_NODES nodes (8 one-GPU pods a node, extended-resource and
# claim shapes), a steady loop at BENCH_LIVE_NODES nodes with 10 running
# pods each, and a scale-down of 60% of BENCH_LIVE_SCALEDOWN_NODES DRA
# nodes at CA's parallelism defaults and raised; one line each.
# BENCH_LIVE selects benchmarks (a -bench regexp, taken as written: a $
# in it is not make's); BENCH_LIVE_SCALEDOWN_MINUTES ends a scale-down
# run early (CA's defaults remove one node a loop).
BENCH_LIVE_NODES ?= 5000
BENCH_LIVE_SCALEDOWN_NODES ?= 2000
BENCH_LIVE_SCALEDOWN_MINUTES ?= 600
BENCH_LIVE ?= ^BenchmarkLive
bench-live: controlplane
	@mkdir -p $(BIN)
	@BENCH_LIVE_NODES=$(BENCH_LIVE_NODES) BENCH_LIVE_SCALEDOWN_NODES=$(BENCH_LIVE_SCALEDOWN_NODES) \
	BENCH_LIVE_SCALEDOWN_MINUTES=$(BENCH_LIVE_SCALEDOWN_MINUTES) \
	$(GO) test -tags benchlive -run '^$$' -bench '$(value BENCH_LIVE)' -benchtime 1x -timeout 900m ./test/benchlive/ \
		> $(BIN)/bench-live.log 2>&1; rc=$$?; \
	grep -E '^bench-live ' $(BIN)/bench-live.log || { echo "bench-live: no benchmark ran (BENCH_LIVE='$(value BENCH_LIVE)')"; rc=1; }; \
	[ $$rc -eq 0 ] || { grep -E '^(--- FAIL|FAIL|panic)|_test.go:[0-9]+:' $(BIN)/bench-live.log | tail -20; echo "full log: $(BIN)/bench-live.log"; }; exit $$rc

# Every test that needs no control plane: the end-to-end and other
# control-plane tests skip themselves under -short.
test-unit:
	$(GO) test $(TEST_TAGS) -short -count=1 -timeout 10m $(PKGS)

test-race:
	$(GO) test $(TEST_TAGS) -short -race -count=1 -timeout 20m $(PKGS)

# golangci-lint v2, installed once per version into .cache/bin.
GOLANGCI_LINT_VERSION = v2.15.0
GOLANGCI_LINT = .cache/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

lint: gofmt-check golangci-lint

# The benchmarks behind build tags are compiled by nothing else: vet them
# so that a Kubernetes bump cannot leave them broken unseen.
vet-tagged:
	$(GO) vet -tags benchlive,schedulerperf ./test/benchlive/ ./test/schedulerperf/
	$(GO) vet $(TEST_TAGS) ./simulator/placement/

golangci-lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run $(PKGS)

$(GOLANGCI_LINT):
	GOBIN=$(abspath $(dir $(GOLANGCI_LINT))) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

gofmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The gomock mocks come from mockgen at go.mod's go.uber.org/mock version
# (the go:generate line names it; mocks-check fails when the two differ).
MOCKGEN_VERSION = $(shell $(GO) list -m -f '{{.Version}}' go.uber.org/mock)

mocks:
	$(GO) generate ./cloudprovider/...

mocks-check: mocks
	@grep -q 'mockgen@$(MOCKGEN_VERSION) ' cloudprovider/provider.go || \
		{ echo "cloudprovider/provider.go: go:generate runs a mockgen other than go.mod's go.uber.org/mock $(MOCKGEN_VERSION)"; exit 1; }
	@git diff --exit-code -- cloudprovider/mocks && test -z "$$(git status --porcelain -- cloudprovider/mocks)" || \
		{ echo "cloudprovider/mocks differ from what mockgen generates: run make mocks and commit"; exit 1; }

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

controlplane: $(CONTROLPLANE_DIR)/.built

print-controlplane-dir:
	@echo $(CONTROLPLANE_DIR)

# Kueue's controller manager for the end-to-end tests, built from its own
# tool module (test/tools/kueue: Kueue's dependency versions, not draxr's)
# into the ignored cache; rebuilt only when the pinned version changes.
KUEUE_VERSION = $(shell cd test/tools/kueue && $(GO) list -m -f '{{.Version}}' sigs.k8s.io/kueue)
KUEUE_BIN = .cache/kueue/kueue-$(KUEUE_VERSION)
kueue: $(KUEUE_BIN)

print-kueue-bin:
	@echo $(KUEUE_BIN)

$(KUEUE_BIN):
	mkdir -p $(dir $(KUEUE_BIN))
	cd test/tools/kueue && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $(KUEUE_BIN)) sigs.k8s.io/kueue/cmd/kueue

$(CONTROLPLANE_DIR)/.built:
	mkdir -p $(CONTROLPLANE_DIR)
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o $(CONTROLPLANE_DIR)/ \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager
	$(GO) build -o $(CONTROLPLANE_DIR)/etcd go.etcd.io/etcd/server/v3
	touch $@

# A control plane with draxr-scheduler on 127.0.0.1 for people.
CLUSTER_DIR = .cache/cluster
cluster-up: controlplane
	$(GO) build -o $(BIN)/ ./scheduler/cmd/draxr-scheduler ./test/controlplane/cmd/draxr-cluster
	$(BIN)/draxr-cluster up $(CLUSTER_DIR) $(CONTROLPLANE_DIR) $(BIN)/draxr-scheduler

# Test nodes for the cluster make cluster-up started: NODES real kubelets
# (draxr-test-node, no container runtime) with the reference DRA driver
# publishing DEVICES devices of DRIVER each, Ready and untainted.
NODES ?= 2
DEVICES ?= 4
DRIVER ?= gpu.example.com
cluster-nodes:
	$(GO) build -o $(BIN)/ ./test/controlplane/cmd/draxr-cluster ./kubelet/cmd/draxr-test-node
	$(BIN)/draxr-cluster nodes $(CLUSTER_DIR) $(NODES) $(DEVICES) $(DRIVER) $(abspath $(BIN))/draxr-test-node

# Kueue v0.17.0's manager on that cluster, as the end-to-end tests run it
# (test/kueue): the ProvisioningRequest CRD, Kueue's CRDs from its module,
# one process on 127.0.0.1 without webhook configurations, stopped by
# make cluster-down. DEVICE_CLASS_MAPPINGS (NAME=CLASS[,CLASS] ...) turns
# on Kueue's DRA quota: claim-template pods charged as NAME.
DEVICE_CLASS_MAPPINGS ?=
cluster-kueue: kueue
	$(GO) build -o $(BIN)/ ./test/controlplane/cmd/draxr-cluster
	$(BIN)/draxr-cluster kueue $(CLUSTER_DIR) $(CURDIR) $(DEVICE_CLASS_MAPPINGS)

# An autoscaler on that cluster for the NodeGroups file GROUPS, with the
# admin kubeconfig and draxr-scheduler's configuration, ARGS added
# (e.g. --enable-provisioning-requests), stopped by make cluster-down.
# TEST_NODES=true: draxr-autoscaler-testnodes, whose nodes are test
# kubelets that run pods; false: the shipped draxr-autoscaler, whose
# local provider makes Node objects that pods bind to but never run on.
GROUPS ?=
ARGS ?=
TEST_NODES ?= true
cluster-autoscaler:
	@test -n "$(GROUPS)" || { echo "make cluster-autoscaler GROUPS=nodegroups.yaml [ARGS=...]"; exit 1; }
ifeq ($(TEST_NODES),true)
	$(GO) build -o $(BIN)/ ./test/controlplane/cmd/draxr-cluster ./test/cmd/draxr-autoscaler-testnodes ./kubelet/cmd/draxr-test-node
	$(BIN)/draxr-cluster autoscaler $(CLUSTER_DIR) $(abspath $(GROUPS)) $(abspath $(BIN))/draxr-autoscaler-testnodes \
		--local-test-node-binary=$(abspath $(BIN))/draxr-test-node $(ARGS)
else
	$(GO) build -o $(BIN)/ ./test/controlplane/cmd/draxr-cluster ./autoscaler/cmd/draxr-autoscaler
	$(BIN)/draxr-cluster autoscaler $(CLUSTER_DIR) $(abspath $(GROUPS)) $(abspath $(BIN))/draxr-autoscaler $(ARGS)
endif

cluster-down:
	$(GO) build -o $(BIN)/ ./test/controlplane/cmd/draxr-cluster
	$(BIN)/draxr-cluster down $(CLUSTER_DIR)

# Benchmarks: medians over BENCH_COUNT runs; compare with benchstat.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_PKGS) | tee bench.out

# The externalgrpc provider's Go code, generated from its .proto with
# protoc (Debian: protobuf-compiler) and the protobuf and gRPC generators
# (Go modules: protoc-gen-go at the go.mod version, protoc-gen-go-grpc at
# PROTOC_GEN_GO_GRPC_VERSION). The generated files are committed; a test
# checks them against the .proto when protoc is installed.
PROTOC_GEN_GO_GRPC_VERSION = v1.5.1
PROTO_DIR = cloudprovider/externalgrpc/protos
protos:
	@mkdir -p .cache/bin
	$(GO) build -o .cache/bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	GOBIN=$(abspath .cache/bin) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	protoc --plugin=protoc-gen-go=.cache/bin/protoc-gen-go --plugin=protoc-gen-go-grpc=.cache/bin/protoc-gen-go-grpc \
		-I $(PROTO_DIR) --go_out=$(PROTO_DIR) --go_opt=paths=source_relative \
		--go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative externalgrpc.proto
