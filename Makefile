# paywarden — build, generate, verify and test.
#
# Everything the targets need is built from Go modules into bin/, so a machine
# with Go and access to the Go module proxy can run `make test`.

CONTROLLER_TOOLS_VERSION ?= v0.23.0

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
ENVTEST_DIR ?= $(LOCALBIN)/k8s
# KUBEBUILDER_ASSETS, when set, points at an existing kube-apiserver + etcd and
# skips the envtest build.
KUBEBUILDER_ASSETS ?= $(ENVTEST_DIR)
export KUBEBUILDER_ASSETS
# STRIPE_MOCK, when set, points at an existing stripe-mock binary and skips its
# build; the Stripe adapter's wire conformance suite runs it.
STRIPE_MOCK_BIN ?= $(LOCALBIN)/stripe-mock
STRIPE_MOCK ?= $(STRIPE_MOCK_BIN)
export STRIPE_MOCK

# Packages whose tests exercise concurrency run with the race detector. The
# envtest suites spend most of their time waiting on a control plane, so four
# packages run at once (-p 4) and a package's parallel tests (the
# controllers suite's, each in a namespace of its own) eight at a time.
GO_TEST_FLAGS ?= -race -count=1 -p 4 -parallel 8
# Packages tested without the race detector: the image package's test is
# one goroutine that compresses, hashes and unpacks 80 MiB of binaries,
# work the detector slows several times over and has nothing to find in.
# They run beside the main run, as the Helm chart's module does.
RACE_FREE_PKGS ?= ./internal/image/
# go vet compiles every dependency to read its types; with -race it compiles
# them as the suites do, so a cold run compiles them once, not twice.
VET_FLAGS ?= -race
GO_TEST_TIMEOUT ?= 20m
FUZZTIME ?= 10s
FUZZTIME_SHORT ?= 8000x

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers, and the Helm chart from config/.
	$(CONTROLLER_GEN) rbac:roleName=paywarden-manager crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./hack/helmgen -out charts/paywarden

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code from the markers.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Format the Go sources.
	gofmt -s -w $$(git ls-files --cached --others --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet (the Helm chart's test module too).
	go vet $(VET_FLAGS) ./...
	cd test/helm && go vet $(VET_FLAGS) ./...

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail when generated files are stale or a Go file is unformatted (changes nothing).
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify.sh

.PHONY: envtest
envtest: ## Build the envtest control plane (kube-apiserver, etcd) and kubectl into bin/k8s unless KUBEBUILDER_ASSETS is set.
	@if [ "$(KUBEBUILDER_ASSETS)" = "$(ENVTEST_DIR)" ]; then hack/envtest/build.sh $(ENVTEST_DIR); \
	else echo "using KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS)"; fi

.PHONY: stripe-mock
stripe-mock: ## Build stripe-mock (pinned in hack/stripemock) into bin/ unless STRIPE_MOCK is set.
	@if [ "$(STRIPE_MOCK)" = "$(STRIPE_MOCK_BIN)" ]; then hack/stripemock/build.sh $(STRIPE_MOCK_BIN); \
	else echo "using STRIPE_MOCK=$(STRIPE_MOCK)"; fi

.PHONY: test
test: prepare ## Verify, run the unit and envtest suites (the Helm chart's module too), then the CI-sized chaos soak; a short fuzz run of every provider parser runs beside both at the lowest CPU priority.
	hack/test.sh $(FUZZTIME_SHORT) $(LOCALBIN)/fuzz-short.log

# prepare runs verify-then-vet beside the test servers' builds: on a cold
# machine each is a long build with idle moments (a link, one large package,
# module downloads) that the others fill. vet waits for verify, which
# regenerates files in place for a moment; so does make test's fuzz run.
.PHONY: prepare
prepare: ## verify, vet and the test servers' builds, at once: what the suites need first.
	@mkdir -p $(LOCALBIN)
	$(MAKE) --no-print-directory -j3 --output-sync=line verify-then-vet envtest stripe-mock

.PHONY: suites
suites: prepare ## make test without its soak and fuzz run: verify, vet and the test servers' builds, then the unit and envtest suites.
	@$(MAKE) --no-print-directory suites-run

# suites-run is the suites once prepare has run: the unit and envtest suites,
# with the Helm chart's module and the race-free packages beside the main
# run (their output after it).
.PHONY: suites-run
suites-run:
	@echo "cd test/helm && go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) ./...  (beside the next ones; its output follows them)"
	@(cd test/helm && go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) ./...) >$(LOCALBIN)/helm-test.log 2>&1 & chart=$$!; \
	echo "go test -count=1 -timeout $(GO_TEST_TIMEOUT) $(RACE_FREE_PKGS)  (beside the next one; its output follows it)"; \
	go test -count=1 -timeout $(GO_TEST_TIMEOUT) $(RACE_FREE_PKGS) >$(LOCALBIN)/race-free-test.log 2>&1 & free=$$!; \
	pkgs=$$(go list ./... | grep -vxF "$$(go list $(RACE_FREE_PKGS))"); \
	echo "go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) ./... (but $(RACE_FREE_PKGS))"; \
	go test $(GO_TEST_FLAGS) -timeout $(GO_TEST_TIMEOUT) $$pkgs; main=$$?; \
	wait $$free; racefree=$$?; cat $(LOCALBIN)/race-free-test.log; \
	wait $$chart; helm=$$?; cat $(LOCALBIN)/helm-test.log; \
	test $$main = 0 && test $$racefree = 0 && test $$helm = 0

.PHONY: verify-then-vet
verify-then-vet: verify
	$(MAKE) --no-print-directory vet

.PHONY: fuzz-short
fuzz-short: ## make test's fuzz run: every provider header and event parser for FUZZTIME_SHORT executions.
	hack/fuzz.sh $(FUZZTIME_SHORT) internal/provider/

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 10s).
	hack/fuzz.sh $(FUZZTIME)

MUTATE ?= internal/payment/*.go
# The package whose tests judge the breaks: the first file's.
MUTATE_PKG ?= ./$(patsubst %/,%,$(dir $(firstword $(wildcard $(MUTATE)))))
.PHONY: mutate
mutate: ## Break the rules in MUTATE (files of one package, default internal/payment's) one at a time and list the breaks its tests let pass (docs/ci.md).
	go run ./hack/mutate -pkg $(MUTATE_PKG) $(filter-out %_test.go,$(wildcard $(MUTATE)))

.PHONY: dev
dev: envtest plugin ## Run everything locally on an embedded control plane with a demo; Ctrl-C stops it.
	go build -o $(LOCALBIN)/devenv ./cmd/devenv
	$(LOCALBIN)/devenv

.PHONY: dev-smoke
dev-smoke: envtest ## The headless `make dev` smoke test: every demo payment reaches its expected phase.
	go test -count=1 -v ./test/dev/

##@ Performance and chaos (make test runs the CI-sized soak)

# SRC points `make bench` at another checkout: its cmd/manager and
# cmd/receiver are built and measured. BENCH_FLAGS passes more flags
# (go run ./cmd/benchmark -h lists them).
SRC ?=
BENCH_FLAGS ?=
# N is the soak's number of payments (default: CI-sized, 150).
N ?=
SOAK_TIMEOUT ?= 60m

.PHONY: bench
bench: envtest ## Benchmark receiver, manager and happy path on a local control plane (docs/performance.md); SRC=<checkout> measures another tree.
	go run ./cmd/benchmark $(if $(SRC),-src $(SRC)) $(BENCH_FLAGS)

# The soak's test binary is built static and -trimpath, like the binaries it
# runs (harness.Build): their packages are compiled once for both.
.PHONY: soak
soak: envtest ## Chaos soak over real processes, then invariants (docs/soak.md); N=1000 for the full one.
	PAYWARDEN_SOAK=1 SOAK_N=$(N) CGO_ENABLED=0 go test -trimpath -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./test/soak/

##@ Build

.PHONY: build
build: ## Build the binaries into bin/ (kubectl-paywarden among them).
	go build -o $(LOCALBIN)/ ./cmd/...
	ln -sf kubectl-paywarden $(LOCALBIN)/kubectl_complete-paywarden

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/ (kubectl paywarden once bin/ is on the PATH; completes payment names).
	go build -o $(LOCALBIN)/kubectl-paywarden ./cmd/kubectl-paywarden
	ln -sf kubectl-paywarden $(LOCALBIN)/kubectl_complete-paywarden

$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $(CONTROLLER_GEN)

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Deploy

IMG ?= paywarden:latest
# VERSION is stamped into the binaries and labelled; default git describe.
VERSION ?=

.PHONY: image
image: ## Build the image IMG without a container engine: bin/image/oci (OCI layout) and bin/image/paywarden.tar (docker/podman load).
	go run ./hack/image -out $(LOCALBIN)/image -tag $(IMG) $(if $(VERSION),-version $(VERSION))

.PHONY: docker-build
docker-build: ## Build the image with a Docker engine (the same binaries as `make image`, on distroless).
	docker build $(if $(VERSION),--build-arg VERSION=$(VERSION)) -t $(IMG) .

.PHONY: deploy
deploy: manifests ## Deploy to the cluster of the current kubeconfig, with image IMG.
	cd config/default && kubectl kustomize . | sed 's|image: paywarden:latest|image: $(IMG)|' | kubectl apply -f -

.PHONY: undeploy
undeploy: ## Remove paywarden from the cluster (CRDs too: this deletes every Payment).
	kubectl kustomize config/default | kubectl delete --ignore-not-found -f -
