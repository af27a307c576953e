# polyop's build. `make help` lists the targets.
#
# Every tool is installed at a pinned version into bin/ (gitignored) and reused
# from there, so a second run does no work. The control plane the tests run
# against (kube-apiserver, etcd, kubectl) is built from source once per
# Kubernetes version by the Go module in hack/tools/envtest.

# The default target.
.PHONY: all
all: build

# Setting SHELL to bash allows bash commands to be executed by recipes.
# Options are set to exit when a recipe line exits non-zero or a piped command fails.
SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

# Steps depend on each other's output (generate before vet before test) and go
# already uses every core inside a step, so targets run one at a time even
# under `make -j`.
.NOTPARALLEL:

# Tools, pinned. Bumping a version installs the new one next to the old
# (bin/<tool>-<version>) and points the stable name (bin/<tool>) at it.
BUF_VERSION ?= v1.75.0
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2
CONTROLLER_GEN_VERSION ?= v0.23.0

# The Kubernetes version of the control plane the tests and `make run` use. It
# must match the k8s.io/kubernetes version hack/tools/envtest/go.mod requires.
K8S_VERSION ?= 1.37.2

# LOCALBIN holds every installed tool and the control-plane binaries.
LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

BUF ?= $(LOCALBIN)/buf
PROTOC_GEN_GO ?= $(LOCALBIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC ?= $(LOCALBIN)/protoc-gen-go-grpc
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen

# ENVTEST_ASSETS is the directory KUBEBUILDER_ASSETS points at for the tests.
ENVTEST_MODULE := hack/tools/envtest
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s-$(K8S_VERSION)
# Built outside Kubernetes' own build scripts, the binaries would report
# version v0.0.0-master; stamp the real one.
K8S_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=v$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION)))
KUBECTL_LDFLAGS := -X k8s.io/client-go/pkg/version.gitVersion=v$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitVersion=v$(K8S_VERSION)

# The example operator and the generated files `make check-generated` guards
# (git pathspecs, relative to the repository root).
EXAMPLE_DIR ?= examples/go/maintenancewindow
EXAMPLE_PKG ?= ./$(EXAMPLE_DIR)
GENERATED_PATHS ?= gen \
	':(glob)examples/**/zz_generated.*.go' \
	':(glob)examples/**/config/crd/**' \
	':(glob)examples/**/config/rbac/**'

# go test settings. Packages that start an API server are heavy: two at a time
# suits a machine with two cores. Add flags such as -run or -v with GO_TEST_FLAGS.
GO_TEST_PKGS ?= ./...
GO_TEST_PARALLEL ?= 2
GO_TEST_TIMEOUT ?= 30m
GO_TEST_FLAGS ?=
BENCH_PKGS ?= ./internal/...
BENCH_FLAGS ?=

# Arguments for `make run`, e.g. make run ARGS=--exit-when-reconciled
ARGS ?=

##@ General

# The help target prints every target that has a `## description` comment,
# grouped by the `##@` headings above them.
.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: generate-proto generate-examples ## Regenerate all generated code.

.PHONY: generate-proto
generate-proto: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## Generate code from proto/ with buf (removes gen/go first so deleted protos vanish).
	rm -rf gen/go
	$(BUF) generate

# The examples' generate.go files carry //go:generate lines; bin/ comes first on
# PATH so they find controller-gen at the pinned version.
.PHONY: generate-examples
generate-examples: $(CONTROLLER_GEN) ## Generate the examples' CRDs and deepcopy functions (go generate).
	PATH="$(LOCALBIN):$$PATH" CONTROLLER_GEN="$(CONTROLLER_GEN)" go generate ./examples/...

.PHONY: check-generated
check-generated: generate ## Fail if regenerating changes any generated file.
	@if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		echo "check-generated needs a git work tree"; exit 1; \
	fi
	@stale=$$(git diff --name-only -- $(GENERATED_PATHS)); \
	untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED_PATHS)); \
	if [ -n "$$stale$$untracked" ]; then \
		echo "generated code is stale: run make generate"; \
		[ -z "$$stale" ] || { echo "changed:"; printf '  %s\n' $$stale; git diff --stat -- $(GENERATED_PATHS); }; \
		[ -z "$$untracked" ] || { echo "not in git:"; printf '  %s\n' $$untracked; }; \
		exit 1; \
	fi

.PHONY: lint-proto
lint-proto: $(BUF) ## Lint the proto files with buf.
	$(BUF) lint

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

##@ Test

# `test` runs every check, then the tests of each language; add a test-<lang>
# target and list it here.
.PHONY: test
test: tools envtest lint-proto check-generated vet test-go ## Run all checks and tests.

.PHONY: test-go
test-go: envtest ## Run the Go tests (against a real API server, see KUBEBUILDER_ASSETS).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -count=1 -timeout $(GO_TEST_TIMEOUT) -p $(GO_TEST_PARALLEL) $(GO_TEST_FLAGS) $(GO_TEST_PKGS)

.PHONY: bench
bench: envtest ## Run the Go benchmarks.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -run '^$$' -bench . -benchmem $(BENCH_FLAGS) $(BENCH_PKGS)

##@ Build

.PHONY: build
build: | $(LOCALBIN) ## Build the host, the example sidecar and the test sidecar into bin/.
	go build -o $(LOCALBIN)/host ./cmd/host
	go build -o $(LOCALBIN)/maintenancewindow-sidecar $(EXAMPLE_PKG)
	go build -o $(LOCALBIN)/testsidecar ./test/testsidecar

# hack/run is built and then run rather than `go run`: go run exits with
# status 1 after a Ctrl-C however its program ended, and does not pass SIGTERM
# on.
.PHONY: run
run: envtest | $(LOCALBIN) ## Run the example against a cluster (the configured one, else a local control plane). Pass flags with ARGS=...
	go build -o $(LOCALBIN)/polyop-run ./hack/run
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(LOCALBIN)/polyop-run $(ARGS)

.PHONY: clean
clean: ## Remove built binaries and `make run` state (keeps tools and the control plane).
	rm -rf $(LOCALBIN)/host $(LOCALBIN)/maintenancewindow-sidecar $(LOCALBIN)/testsidecar $(LOCALBIN)/polyop-run $(LOCALBIN)/run
	go clean -testcache

.PHONY: clean-all
clean-all: clean ## Also remove every installed tool and the control-plane binaries (bin/).
	rm -rf $(LOCALBIN)

##@ Dependencies

.PHONY: tools
tools: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(CONTROLLER_GEN) ## Install the pinned tools into bin/.

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd $(ENVTEST_ASSETS)/kubectl ## Build kube-apiserver, etcd and kubectl for KUBEBUILDER_ASSETS (once per version).

# go-install-tool defines two rules for a tool:
#   $(1)-$(3)  the tool at version $(3), installed from package $(2) with
#              GOBIN set to a scratch folder in bin/ (so that an existing
#              bin/<tool> symlink is never written through), then renamed;
#   $(1)       a symlink to it, remade whenever it points anywhere else.
# The stable name is what buf.gen.yaml and the recipes use.
define go-install-tool
$(1)-$(3): | $(LOCALBIN)
	@echo "Installing $(2)@$(3)"
	@tmp=$$$$(mktemp -d "$(LOCALBIN)/.install.XXXXXX"); \
	trap 'rm -rf "$$$$tmp"' EXIT; \
	GOBIN="$$$$tmp" go install $(2)@$(3); \
	mv "$$$$tmp/$(notdir $(2))" "$$@"

$(1): $(1)-$(3) $(if $(filter $(notdir $(1))-$(3),$(shell readlink $(1) 2>/dev/null)),,FORCE)
	ln -sfn "$(notdir $(1))-$(3)" "$$@"
endef

$(eval $(call go-install-tool,$(BUF),github.com/bufbuild/buf/cmd/buf,$(BUF_VERSION)))
$(eval $(call go-install-tool,$(PROTOC_GEN_GO),google.golang.org/protobuf/cmd/protoc-gen-go,$(PROTOC_GEN_GO_VERSION)))
$(eval $(call go-install-tool,$(PROTOC_GEN_GO_GRPC),google.golang.org/grpc/cmd/protoc-gen-go-grpc,$(PROTOC_GEN_GO_GRPC_VERSION)))
$(eval $(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_GEN_VERSION)))

# The control-plane binaries are files named by version: built when missing, or
# when the tools module changes. The first build takes several minutes.
ENVTEST_MODULE_FILES := $(ENVTEST_MODULE)/go.mod $(ENVTEST_MODULE)/go.sum

# envtest-build builds package $(1) of the tools module into $@ with extra go
# build flags $(2), after checking the module builds the version asked for. The
# binary is renamed into place, so tests running the previous one are not
# disturbed.
define envtest-build
	@grep -Eq '^[[:space:]]*k8s\.io/kubernetes v$(subst .,\.,$(K8S_VERSION))([[:space:]]|$$)' $(ENVTEST_MODULE)/go.mod || { \
		echo "K8S_VERSION is $(K8S_VERSION) but $(ENVTEST_MODULE)/go.mod requires another k8s.io/kubernetes: update one of them"; \
		exit 1; }
	@mkdir -p $(@D)
	@echo "Building $(notdir $@) v$(K8S_VERSION) from source into $(@D) (takes a while the first time)"
	cd $(ENVTEST_MODULE) && go build $(2) -o $(abspath $@).tmp $(1)
	mv $@.tmp $@
endef

$(ENVTEST_ASSETS)/kube-apiserver: $(ENVTEST_MODULE_FILES)
	$(call envtest-build,k8s.io/kubernetes/cmd/kube-apiserver,-ldflags "$(K8S_VERSION_LDFLAGS)")

$(ENVTEST_ASSETS)/etcd: $(ENVTEST_MODULE_FILES) $(ENVTEST_MODULE)/etcd/main.go
	$(call envtest-build,./etcd)

$(ENVTEST_ASSETS)/kubectl: $(ENVTEST_MODULE_FILES)
	$(call envtest-build,k8s.io/kubernetes/cmd/kubectl,-ldflags "$(KUBECTL_LDFLAGS)")

.PHONY: FORCE
FORCE:

# print-VAR prints a variable's value, e.g. make print-K8S_VERSION.
print-%:
	@echo '$($*)'
