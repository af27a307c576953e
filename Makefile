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
GOLANGCI_LINT_VERSION ?= v2.15.0

# The Kubernetes version of the control plane the tests and `make run` use. It
# must match the k8s.io/kubernetes version hack/tools/envtest/go.mod requires.
K8S_VERSION ?= 1.37.2

# The Python virtualenv (gitignored) holds the Python code generators, the
# Python SDK and examples (installed editable), mypy and pytest, at the pins of
# PYTHON_REQUIREMENTS. Its stamp is named by a checksum of the pins and of the
# packages' pyproject.toml, so a change to either makes it again from scratch,
# and nothing else does. buf.gen.yaml runs the generators from .venv/bin.
PYTHON ?= python3
VENV := .venv
PYTHON_REQUIREMENTS := sdk/python/requirements-dev.txt
PYTHON_PACKAGES ?= sdk/python examples/python/tenant
PYTHON_GEN_DIR := sdk/python/src/polyop/v1alpha1
VENV_STAMP := $(VENV)/.polyop-$(shell cat $(PYTHON_REQUIREMENTS) $(addsuffix /pyproject.toml,$(PYTHON_PACKAGES)) 2>/dev/null | sha256sum | cut -c1-16)
# Flags for pytest, e.g. PYTEST_FLAGS='-k reconcile -v'.
PYTEST_FLAGS ?=

# The npm workspace of package.json (the TypeScript SDK and examples) installs
# from package-lock.json into node_modules (gitignored) with npm ci. Its stamp
# is named by a checksum of the lockfile and the package.json files, so a
# change to either installs again, and nothing else does. buf.gen.yaml runs
# protoc-gen-es from node_modules/.bin.
NPM ?= npm
TS_PACKAGES ?= sdk/typescript examples/typescript/configmapsync
TS_GEN_DIR := sdk/typescript/src/gen
NODE_MODULES_STAMP := node_modules/.polyop-$(shell cat package-lock.json package.json $(addsuffix /package.json,$(TS_PACKAGES)) 2>/dev/null | sha256sum | cut -c1-16)

# LOCALBIN holds every installed tool and the control-plane binaries.
LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

BUF ?= $(LOCALBIN)/buf
PROTOC_GEN_GO ?= $(LOCALBIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC ?= $(LOCALBIN)/protoc-gen-go-grpc
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint

# ENVTEST_ASSETS is the directory KUBEBUILDER_ASSETS points at for the tests.
ENVTEST_MODULE := hack/tools/envtest
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s-$(K8S_VERSION)

# The example operator and the generated files `make check-generated` guards
# (git pathspecs, relative to the repository root).
EXAMPLE_DIR ?= examples/go/maintenancewindow
EXAMPLE_PKG ?= ./$(EXAMPLE_DIR)
GENERATED_PATHS ?= sdk/go/gen \
	internal/version/zz_generated.version.go \
	':(glob)$(PYTHON_GEN_DIR)/*_pb2*' \
	':(glob)examples/**/zz_generated.*.go' \
	':(glob)examples/**/config/crd/**' \
	':(glob)test/benchmark/api/**/zz_generated.*.go' \
	':(glob)test/benchmark/config/crd/**' \
	':(glob)examples/**/config/rbac/**' \
	':(glob)config/overlays/*/generated/**' \
	$(TS_GEN_DIR)

# The Go modules: the host's (the repository root) and the Go SDK's (sdk/go),
# which go.work puts in one workspace. A pattern such as ./... at the root
# does not reach into the SDK's module: the Go targets name both. The tools
# module of hack/tools/envtest stays out of the workspace (its Kubernetes
# dependencies are not the host's) and builds with GOWORK=off.
GO_MODULES := . sdk/go
GO_PKGS := ./... ./sdk/go/...

# go test settings. Packages that start an API server are heavy: two at a time
# suits a machine with two cores. Add flags such as -run or -v with GO_TEST_FLAGS.
GO_TEST_PKGS ?= $(GO_PKGS)
GO_TEST_PARALLEL ?= 2
GO_TEST_TIMEOUT ?= 30m
GO_TEST_FLAGS ?=
BENCH_PKGS ?= ./internal/...
# `make fuzz` runs each Go fuzz target matching FUZZ for FUZZTIME, one after
# the other (see docs/fuzzing.md). Add flags such as -parallel=1 with
# FUZZ_FLAGS.
FUZZ ?= ^Fuzz
FUZZTIME ?= 1m
FUZZ_FLAGS ?=
BENCH_FLAGS ?=
# Flags for the end-to-end benchmark (hack/bench), e.g. BENCH_ARGS='-rounds 1 -sizes 500'
# for a quick look, or BENCH_ARGS=-update to also rewrite BENCHMARKS.md's table.
BENCH_ARGS ?=

# Arguments for `make run` (polyop run's flags), e.g. make run ARGS=--exit-when-ready,
# or ARGS=--local for a local control plane even when a cluster is configured.
ARGS ?=

##@ General

# The help target prints every target that has a `## description` comment,
# grouped by the `##@` headings above them.
.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: generate-version generate-proto generate-examples ## Regenerate all generated code.

# The VERSION file is polyop's one version (see internal/version): the Go
# binaries read it from internal/version, where go generate writes it, so that
# a `go install …@v<version>` knows its version without -ldflags.
.PHONY: generate-version
generate-version: ## Write the VERSION file's version into internal/version (go generate) and the host's requirement on the Go SDK.
	go generate ./internal/version
	go mod edit -require=github.com/polyop/polyop/sdk/go@v$(SDK_VERSION)
	@old=$$(sed -n 's|^replace github.com/polyop/polyop/sdk/go \(v[^ ]*\) => ./sdk/go$$|\1|p' go.work); \
	if [ "$$old" != "v$(SDK_VERSION)" ]; then \
		go work edit -dropreplace=github.com/polyop/polyop/sdk/go@$$old -replace=github.com/polyop/polyop/sdk/go@v$(SDK_VERSION)=./sdk/go; \
	fi

.PHONY: generate-proto
generate-proto: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(VENV_STAMP) $(NODE_MODULES_STAMP) ## Generate code from proto/ with buf (removes the generated code first so deleted protos vanish).
	rm -rf sdk/go/gen $(TS_GEN_DIR)
	rm -f $(PYTHON_GEN_DIR)/*_pb2*.py $(PYTHON_GEN_DIR)/*_pb2*.pyi
	$(BUF) generate
	$(BUF) generate --template sdk/typescript/buf.gen.yaml

# The generate.go files of the examples and of the benchmark's Widget API carry
# //go:generate lines; bin/ comes first on PATH so they find controller-gen at
# the pinned version. The Python example's CRD comes from its pydantic models
# (tenant/api.py) through polyop.crd, the TypeScript example's from its TypeBox
# kind (src/types.ts) through polyop-crd, as a generated project's do.
.PHONY: generate-examples
generate-examples: $(CONTROLLER_GEN) $(VENV_STAMP) $(NODE_MODULES_STAMP) ## Generate the CRDs and deepcopy functions of the examples and the benchmark's Widget (go generate), and the Python and TypeScript examples' CRDs from their types (polyop.crd, polyop-crd).
	PATH="$(LOCALBIN):$$PATH" CONTROLLER_GEN="$(CONTROLLER_GEN)" go generate ./examples/... ./test/benchmark/
	cd examples/python/tenant && $(CURDIR)/$(VENV)/bin/python -m polyop.crd tenant.api -o config/crd
	node_modules/.bin/tsc -b examples/typescript/configmapsync
	node sdk/typescript/dist/crd-cli.js examples/typescript/configmapsync/dist/types.js -o examples/typescript/configmapsync/config/crd

.PHONY: check-generated
check-generated: generate manifests ## Fail if regenerating changes any generated file.
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

# PROTO_BASELINE is the contract as last accepted: a buf image (JSON, without
# source info, so it changes only when the contract does). check-breaking
# compares proto/ with it by buf.yaml's breaking rules. While the version is
# alpha, an intended break is accepted by recording the contract anew with
# proto-baseline and committing the file with the change that breaks it;
# record it as well after adding to the contract, so that taking an addition
# back out is caught too.
PROTO_BASELINE ?= hack/proto-baseline.json

.PHONY: check-breaking
check-breaking: $(BUF) ## Fail if proto/ breaks the contract as last accepted (PROTO_BASELINE); see proto-baseline.
	@$(BUF) breaking --against $(PROTO_BASELINE) || { \
		echo "proto/ breaks the contract recorded in $(PROTO_BASELINE) (see above)."; \
		echo "If the break is intended (the version is alpha), accept it with make proto-baseline and commit $(PROTO_BASELINE) with the change."; \
		exit 1; }

.PHONY: proto-baseline
proto-baseline: $(BUF) ## Record proto/ as the accepted contract that check-breaking compares against (accepts an intended break).
	$(BUF) build --exclude-source-info -o $(PROTO_BASELINE)

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt $(GO_PKGS)

.PHONY: vet
vet: ## Run go vet.
	go vet $(GO_PKGS)

# lint-go runs golangci-lint with .golangci.yml over both Go modules (the
# generated code excluded there).
.PHONY: lint-go
lint-go: $(GOLANGCI_LINT) ## Lint the Go code with golangci-lint (.golangci.yml).
	$(GOLANGCI_LINT) run $(GO_PKGS)

# check-tidy fails when a module's go.mod or go.sum is not what go mod tidy
# makes of it, each module on its own (GOWORK=off), as its users build it.
#
# The host's module requires the SDK's at polyop's version, which only a
# release publishes: outside go.work it resolves through GOPROXY_DIR, the
# working tree's modules as a release's tags will serve them (hack/goproxy),
# in a module cache of its own (a version, once cached, never changes there),
# fed from the machine's module cache and then the proxy.
GOPROXY_DIR := $(LOCALBIN)/goproxy
GO_TIDY_ENV = GOWORK=off GOMODCACHE="$$modcache" GOFLAGS="$$(go env GOFLAGS) -modcacherw" \
	GOPROXY="file://$(GOPROXY_DIR),file://$$(go env GOMODCACHE)/cache/download,$$(go env GOPROXY)" \
	GONOSUMDB=github.com/polyop/polyop

# go-tidy runs go mod tidy with the flags $(1) in each Go module: the host's
# through GOPROXY_DIR, the others each on its own.
#
# The SDK's go.sum lines change with every change to sdk/go (its module zip's
# hash): make tidy drops them first and writes them anew; check-tidy says so
# rather than letting go call the mismatch a security error.
define go-tidy
	@mkdir -p $(GOPROXY_DIR)
	@go run ./hack/goproxy -out $(GOPROXY_DIR) -version $(SDK_VERSION) | grep '^github.com/polyop/polyop/sdk/go ' >$(GOPROXY_DIR)/sdk-go.sum
	@$(if $(filter -diff,$(1)),grep -qxFf $(GOPROXY_DIR)/sdk-go.sum go.sum && [ $$(grep -cxFf $(GOPROXY_DIR)/sdk-go.sum go.sum) -eq 2 ] || { \
		echo "go.sum's lines for github.com/polyop/polyop/sdk/go are not those of sdk/go as it is now (any change to sdk/go changes them): run make tidy"; exit 1; },sed -i.bak '/^github.com\/polyop\/polyop\/sdk\/go /d' go.sum && rm -f go.sum.bak)
	@modcache=$$(mktemp -d); trap 'rm -rf "$$modcache"' EXIT; \
	{ $(GO_TIDY_ENV) go mod tidy $(1) 2>&1 | { grep -v '^go: downloading' || true; }; } || { echo "go.mod or go.sum is not tidy: run make tidy"; exit 1; }
	@for m in $(filter-out .,$(GO_MODULES)) hack/tools/promcheck hack/tools/release; do \
		(cd $$m && GOWORK=off go mod tidy $(1)) || { echo "$$m: go.mod or go.sum is not tidy: run make tidy"; exit 1; }; \
	done
endef

.PHONY: check-tidy
check-tidy: | $(LOCALBIN) ## Fail if go mod tidy would change the go.mod or go.sum of a Go module (the host's, the SDK's, hack/tools/promcheck's, hack/tools/release's).
	$(call go-tidy,-diff)

.PHONY: tidy
tidy: | $(LOCALBIN) ## Run go mod tidy in each Go module (the host's resolves the SDK at VERSION from the working tree, and records its go.sum lines).
	$(call go-tidy,)

##@ Test

# `test` runs every check, then the tests of each language; add a test-<lang>
# target and list it here.
.PHONY: test
test: tools envtest lint-proto check-breaking check-generated check-tidy vet lint-go test-go test-python test-typescript ## Run all checks and tests.

.PHONY: test-go
test-go: envtest $(VENV_STAMP) $(NODE_MODULES_STAMP) ## Run the Go tests (against a real API server, see KUBEBUILDER_ASSETS; the end-to-end tests run the Python example from .venv and the TypeScript example with node).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -count=1 -timeout $(GO_TEST_TIMEOUT) -p $(GO_TEST_PARALLEL) $(GO_TEST_FLAGS) $(GO_TEST_PKGS)
	cd hack/tools/release && GOWORK=off go test -count=1 -timeout $(GO_TEST_TIMEOUT) ./...

# fuzz finds the packages with fuzz targets among the tracked test files. go
# test runs their seeds (f.Add and testdata/fuzz) without -fuzz, in test-go.
.PHONY: fuzz
fuzz: ## Run each Go fuzz target matching FUZZ (all by default) for FUZZTIME (1m by default); a failing input is written to the package's testdata/fuzz.
	@for dir in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
		for target in $$(go test -list '$(FUZZ)' ./$$dir | grep '^Fuzz'); do \
			echo "--- ./$$dir $$target for $(FUZZTIME)"; \
			go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $(FUZZ_FLAGS) ./$$dir || exit 1; \
		done; \
	done

# test-python checks the Python SDK's layering (lint-imports: the contracts
# in sdk/python/pyproject.toml refuse an import of a higher layer and any
# import cycle, type-only imports included), then lints (ruff check, with
# ruff.toml), type-checks (mypy --strict) and tests (pytest) each Python
# package. pytest exits 5 when it collects no test: that fails too.
.PHONY: test-python
test-python: $(VENV_STAMP) ## Run the Python checks and tests (lint-imports, ruff check, mypy --strict, pytest) of the SDK and the examples.
	@echo "--- sdk/python: lint-imports"
	@cd sdk/python && $(CURDIR)/$(VENV)/bin/lint-imports --no-cache
	@for pkg in $(PYTHON_PACKAGES); do \
		echo "--- $$pkg: ruff check"; \
		(cd $$pkg && $(CURDIR)/$(VENV)/bin/ruff check) || exit 1; \
		echo "--- $$pkg: mypy"; \
		(cd $$pkg && $(CURDIR)/$(VENV)/bin/mypy) || exit 1; \
		echo "--- $$pkg: pytest"; \
		rc=0; (cd $$pkg && $(CURDIR)/$(VENV)/bin/pytest $(PYTEST_FLAGS)) || rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "$$pkg: pytest collected no tests"; exit 1; fi; \
		[ $$rc -eq 0 ] || exit $$rc; \
	done

# test-typescript compiles each TypeScript package with tsc -b (strict; a type
# error fails), lints it with eslint (eslint.config.mjs; after tsc, since the
# examples' types come from the SDK's dist/), checks its imports with
# dependency-cruiser (.dependency-cruiser.cjs: no import cycle, type-only
# imports included, and the SDK's layers) and runs its tests with node's test
# runner.
.PHONY: test-typescript
test-typescript: $(NODE_MODULES_STAMP) ## Run the TypeScript checks and tests (tsc strict, eslint, import cycles and layers, node --test) of the SDK and the examples.
	@for pkg in $(TS_PACKAGES); do \
		echo "--- $$pkg: tsc -b"; \
		node_modules/.bin/tsc -b $$pkg || exit 1; \
		echo "--- $$pkg: eslint"; \
		node_modules/.bin/eslint --max-warnings 0 $$pkg || exit 1; \
		echo "--- $$pkg: depcruise"; \
		node_modules/.bin/depcruise --config .dependency-cruiser.cjs $$pkg/src || exit 1; \
		echo "--- $$pkg: node --test"; \
		(cd $$pkg && node --test dist/*.test.js) || exit 1; \
	done
	@echo "--- packaging/npm: node --test"
	@node --test packaging/npm/test/*.test.mjs

.PHONY: bench
bench: envtest $(VENV_STAMP) $(NODE_MODULES_STAMP) | $(LOCALBIN) ## Run the end-to-end benchmark (the host and its sidecars against in-process controller-runtime, see BENCHMARKS.md), then the Go benchmarks.
	go build -o $(LOCALBIN)/polyop-bench ./hack/bench
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(LOCALBIN)/polyop-bench $(BENCH_ARGS)
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -run '^$$' -bench . -benchmem $(BENCH_FLAGS) $(BENCH_PKGS)

##@ Build

# The host and polyop know the VERSION file's version from internal/version
# (make generate-version): the SDK version polyop init makes projects depend
# on, and the host image tag their config/ pins.
.PHONY: build
build: | $(LOCALBIN) ## Build the host, polyop, the example sidecar and the test sidecar into bin/.
	go build -o $(LOCALBIN)/host ./cmd/host
	go build -o $(LOCALBIN)/polyop ./cmd/polyop
	go build -o $(LOCALBIN)/maintenancewindow-sidecar $(EXAMPLE_PKG)
	go build -o $(LOCALBIN)/testsidecar ./test/testsidecar

# run goes through polyop run in the example, as a user runs their own
# project: the example's PROJECT file says how to build and start its sidecar.
# polyop is built and then run rather than `go run`: go run exits with status 1
# after a Ctrl-C however its program ended, and does not pass SIGTERM on.
.PHONY: run
run: envtest | $(LOCALBIN) ## Run the example with polyop run (your cluster, else a local control plane; webhooks wired), apply its samples and show them Ready. Pass flags with ARGS=...
	go build -o $(LOCALBIN)/polyop ./cmd/polyop
	cd $(EXAMPLE_DIR) && KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(LOCALBIN)/polyop run --apply-samples $(ARGS)

.PHONY: clean
clean: ## Remove built binaries and `make run` state (keeps tools and the control plane).
	rm -rf $(LOCALBIN)/host $(LOCALBIN)/maintenancewindow-sidecar $(LOCALBIN)/testsidecar $(LOCALBIN)/polyop $(LOCALBIN)/polyop-bench \
		$(LOCALBIN)/memcached-sidecar $(LOCALBIN)/website-sidecar $(LOCALBIN)/manifests
	go clean -testcache

.PHONY: clean-all
clean-all: clean ## Also remove every installed tool, the control-plane binaries (bin/), the Python virtualenv, node_modules and dist/
	rm -rf $(LOCALBIN) $(VENV) node_modules $(addsuffix /dist,$(TS_PACKAGES)) $(DIST_DIR)

##@ Distribution

# dist builds the SDKs into DIST_DIR (gitignored) for use from other
# repositories: the Python SDK's wheel and sdist (python -m build, without
# build isolation, with the hatchling of .venv) into DIST_DIR/python, the
# TypeScript SDK's npm tarball (npm pack) into DIST_DIR/typescript. The Go SDK
# is the module sdk/go, used by its path (a tag sdk/go/vX.Y.Z releases it).
# Every SDK's version is SDK_VERSION, the VERSION file; test/packaging checks
# that they agree and that the artefacts install and run outside the
# repository.
DIST_DIR ?= dist
SDK_VERSION := $(shell cat VERSION)
# PYTHON_WHEELHOUSE holds the wheels of the Python SDK's runtime dependencies at
# the pins of PYTHON_REQUIREMENTS, downloaded once per virtualenv, so that a
# test installs the SDK's wheel into a fresh virtualenv without an index.
PYTHON_WHEELHOUSE := $(VENV)/wheelhouse

.PHONY: dist
dist: dist-python dist-typescript ## Build the Python SDK's wheel and sdist and the TypeScript SDK's npm tarball into DIST_DIR (dist/), at the version of the VERSION file.

# The wheel dist-python builds is pure: without the polyop binary, it installs
# a polyop that says how to get it (sdk/python/hatch_build.py; release-python
# builds the wheels that carry it).
.PHONY: dist-python
dist-python: $(VENV_STAMP) ## Build the Python SDK's wheel (pure) and sdist into DIST_DIR/python.
	rm -rf $(DIST_DIR)/python
	env -u POLYOP_BINARY -u POLYOP_PLATFORM $(VENV)/bin/python -m build --no-isolation --outdir $(DIST_DIR)/python sdk/python
	@test -f $(DIST_DIR)/python/polyop-$(SDK_VERSION)-py3-none-any.whl || { \
		echo "the Python SDK's version is not VERSION's $(SDK_VERSION): see sdk/python/pyproject.toml"; exit 1; }

.PHONY: dist-typescript
dist-typescript: $(NODE_MODULES_STAMP) ## Build the TypeScript SDK and pack it into DIST_DIR/typescript.
	node_modules/.bin/tsc -b sdk/typescript
	rm -rf $(DIST_DIR)/typescript
	mkdir -p $(DIST_DIR)/typescript
	$(NPM) pack --silent --pack-destination $(abspath $(DIST_DIR)/typescript) -w sdk/typescript
	@test -f $(DIST_DIR)/typescript/polyop-sidecar-$(SDK_VERSION).tgz || { \
		echo "the TypeScript SDK's version is not VERSION's $(SDK_VERSION): see sdk/typescript/package.json"; exit 1; }

.PHONY: python-wheelhouse
python-wheelhouse: $(PYTHON_WHEELHOUSE)/.done ## Download the wheels of the Python SDK's runtime dependencies (at the pins) into .venv/wheelhouse.

$(PYTHON_WHEELHOUSE)/.done: $(VENV_STAMP)
	rm -rf $(PYTHON_WHEELHOUSE)
	$(VENV)/bin/pip download --quiet --disable-pip-version-check --no-build-isolation --only-binary :all: \
		--constraint $(PYTHON_REQUIREMENTS) --dest $(PYTHON_WHEELHOUSE) ./sdk/python
	touch $@

##@ Release

# release builds every artefact of a release of VERSION into DIST_DIR (see
# docs/releasing.md, which says what a maintainer publishes where): the polyop
# binaries of PLATFORMS (stripped, static) with their archives, checksums and
# SBOM; the Python wheels (one per platform, each carrying its binary) and the
# sdist; the npm packages (@polyop/cli, one @polyop/cli-<os>-<cpu> per platform,
# and @polyop/sidecar); the host image as an OCI image tarball (a multi-arch
# index of its linux PLATFORMS, built without a container engine); and a
# GOPROXY=file:// folder holding the Go modules a release tags (v$(SDK_VERSION),
# sdk/go/v$(SDK_VERSION)). Nothing is published from here.
#
# PLATFORMS are GOOS/GOARCH pairs; the tests build the machine's own only:
# make release PLATFORMS=$$(go env GOOS)/$$(go env GOARCH).
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# A release binary: static, without paths of the build machine, without the
# symbol table and DWARF (see docs/releasing.md for what its size is made of).
RELEASE_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w"
# The tools module the release builds with, outside go.work (GOWORK=off):
# cyclonedx-gomod (a tool of its go.mod), which writes the SBOMs, and the
# program of hack/tools/release/image, which builds the host image.
RELEASE_TOOLS := hack/tools/release
# The time in every archive and image, so that the same commit gives the same
# bytes: SOURCE_DATE_EPOCH if set, else the time of the commit built.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
# GNU tar, which the archives are written with (gtar on macOS).
TAR ?= tar
# The host image holds the linux platforms of PLATFORMS and is named as the
# config/ of a project pins it: HOST_IMAGE_REPOSITORY, which is
# internal/scaffold's HostImageRepository (test/packaging checks that they
# agree), at VERSION's tag. RELEASE_SOURCE is the repository its annotations
# name.
HOST_IMAGE_REPOSITORY := ghcr.io/polyop/polyop-host
IMAGE_PLATFORMS = $(filter linux/%,$(PLATFORMS))
RELEASE_SOURCE ?= https://github.com/polyop/polyop

.PHONY: release
release: release-binaries release-python release-npm release-image release-goproxy release-checksums ## Build every artefact of a release into DIST_DIR (dist/): binaries, checksums and SBOM, wheels, npm packages, the host image (OCI tarball), a Go module proxy folder.

.PHONY: release-binaries
release-binaries: ## Build polyop for PLATFORMS into DIST_DIR/bin/polyop-<os>-<arch>, with an archive polyop_<version>_<os>_<arch>.tar.gz and its SBOM (.cdx.json) in DIST_DIR.
	rm -rf $(DIST_DIR)/bin
	rm -f $(DIST_DIR)/polyop_*.tar.gz $(DIST_DIR)/polyop_*.cdx.json
	mkdir -p $(DIST_DIR)/bin
	@# Outside go.work, as `go install …@v$(SDK_VERSION)` builds it: the Go SDK
	@# at v$(SDK_VERSION) from GOPROXY_DIR, so that the binary (and its SBOM)
	@# records the module versions and sums a user's build would.
	@go run ./hack/goproxy -out $(GOPROXY_DIR) -version $(SDK_VERSION) >/dev/null
	@modcache=$$(mktemp -d); trap 'rm -rf "$$modcache"' EXIT; \
	for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "Building polyop $(SDK_VERSION) for $$os/$$arch"; \
		GOOS=$$os GOARCH=$$arch $(GO_TIDY_ENV) $(RELEASE_BUILD) -o $(DIST_DIR)/bin/polyop-$$os-$$arch ./cmd/polyop || exit 1; \
	done
	@# Each archive holds the binary as polyop, README.md and LICENSE (when
	@# there is one), owned by root, with the time SOURCE_DATE_EPOCH. Each
	@# SBOM (CycloneDX JSON) lists the modules the binary records it is built
	@# from (cyclonedx-gomod bin reads them from the binary, whatever its
	@# platform), with their hashes and detected licenses.
	@test -n "$(SOURCE_DATE_EPOCH)" || { echo "no time for the archives: set SOURCE_DATE_EPOCH (seconds since the epoch) outside a git checkout"; exit 1; }
	@$(TAR) --version 2>/dev/null | grep -q 'GNU tar' || { echo "$(TAR) is not GNU tar, which writes the archives: set TAR (TAR=gtar on macOS)"; exit 1; }
	@stage=$$(mktemp -d); trap 'rm -rf "$$stage"' EXIT; \
	cdx=$$(GOWORK=off go tool -n -modfile=$(RELEASE_TOOLS)/go.mod cyclonedx-gomod) || exit 1; \
	for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=polyop_$(SDK_VERSION)_$${os}_$${arch}; \
		echo "Archiving $(DIST_DIR)/$$name.tar.gz and writing its SBOM $(DIST_DIR)/$$name.cdx.json"; \
		rm -rf "$$stage"/*; \
		cp $(DIST_DIR)/bin/polyop-$$os-$$arch "$$stage/polyop"; \
		cp README.md $(wildcard LICENSE) "$$stage/"; \
		$(TAR) --format=ustar --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE_EPOCH) --mode=go-w,a+rX \
			-C "$$stage" -cf - polyop $(wildcard LICENSE) README.md | gzip -n -9 >$(DIST_DIR)/$$name.tar.gz || exit 1; \
		"$$cdx" bin -json -licenses -noserial -notimestamp -version v$(SDK_VERSION) \
			-output $(DIST_DIR)/$$name.cdx.json $(DIST_DIR)/bin/polyop-$$os-$$arch 2>$$stage/cdx.log || { cat $$stage/cdx.log; exit 1; }; \
	done

# release-python builds, into DIST_DIR/python, one wheel per platform of
# PLATFORMS carrying that platform's polyop from DIST_DIR/bin (release-binaries
# builds them) as its polyop command, tagged for the platform by the build hook
# sdk/python/hatch_build.py, and the sdist and the pure wheel (dist-python),
# which pip takes on other platforms. It prints each wheel's size.
.PHONY: release-python
release-python: dist-python ## Build the Python wheels into DIST_DIR/python: one per platform of PLATFORMS carrying DIST_DIR/bin's polyop (make release-binaries first), the pure wheel and the sdist.
	@for p in $(PLATFORMS); do \
		[ -f $(DIST_DIR)/bin/polyop-$${p%/*}-$${p#*/} ] || { \
			echo "release-python: no $(DIST_DIR)/bin/polyop-$${p%/*}-$${p#*/} for $$p: build it with make release-binaries PLATFORMS='$(PLATFORMS)'"; exit 1; }; \
	done
	@for p in $(PLATFORMS); do \
		echo "Building the Python wheel of polyop $(SDK_VERSION) for $$p"; \
		POLYOP_BINARY=$(abspath $(DIST_DIR))/bin/polyop-$${p%/*}-$${p#*/} POLYOP_PLATFORM=$$p \
			$(VENV)/bin/python -m build --no-isolation --wheel --outdir $(DIST_DIR)/python sdk/python || exit 1; \
	done
	@cd $(DIST_DIR)/python && for f in *; do echo "$$(wc -c <$$f) $$f"; done | awk '{ printf "%6.1f MB  %s\n", $$1 / 1e6, $$2 }'

# release-npm packs the npm packages into DIST_DIR/npm with
# packaging/npm/build.mjs (see packaging/npm/cli/README.md): @polyop/cli, the
# polyop command (a Node.js launcher), which lists the package of every
# platform as an optional dependency; one @polyop/cli-<os>-<cpu> for each of
# PLATFORMS, holding the binary release-binaries built into DIST_DIR/bin (run
# it first); and a copy of the SDK's, @polyop/sidecar (dist-typescript). All
# are at VERSION. It prints each tarball's size.
.PHONY: release-npm
release-npm: dist-typescript ## Pack @polyop/cli, @polyop/cli-<os>-<cpu> for PLATFORMS (binaries of release-binaries) and @polyop/sidecar into DIST_DIR/npm.
	rm -rf $(DIST_DIR)/npm
	mkdir -p $(DIST_DIR)/npm
	cp $(DIST_DIR)/typescript/polyop-sidecar-$(SDK_VERSION).tgz $(DIST_DIR)/npm/
	NPM="$(NPM)" node packaging/npm/build.mjs --version $(SDK_VERSION) --platforms "$(PLATFORMS)" \
		--bin-dir $(DIST_DIR)/bin --out $(DIST_DIR)/npm

# release-image cross-compiles the host and the probe for IMAGE_PLATFORMS as
# release-binaries does polyop (into DIST_DIR/image) and puts them into an OCI
# image layout tarball with hack/tools/release/image: a multi-arch index,
# each image the host at /host and the probe at /probe on an empty base with
# CA certificates, /etc/passwd and /etc/group, run as 65532:65532, as the
# Dockerfile builds it. Its annotations name VERSION, RELEASE_SOURCE and the
# commit; every time in it is SOURCE_DATE_EPOCH, so that a second build gives
# the same digests.
.PHONY: release-image
release-image: ## Build the host image of the linux PLATFORMS as an OCI image layout tarball, DIST_DIR/polyop-host-<version>.oci.tar, without a container engine.
	@test -n "$(IMAGE_PLATFORMS)" || { echo "PLATFORMS ($(PLATFORMS)) has no linux platform for the host image"; exit 1; }
	@test -n "$(SOURCE_DATE_EPOCH)" || { echo "no time for the image: set SOURCE_DATE_EPOCH (seconds since the epoch) outside a git checkout"; exit 1; }
	rm -rf $(DIST_DIR)/image
	rm -f $(DIST_DIR)/polyop-host-*.oci.tar
	mkdir -p $(DIST_DIR)/image
	@for p in $(IMAGE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "Building the host and the probe $(SDK_VERSION) for $$os/$$arch"; \
		GOOS=$$os GOARCH=$$arch $(RELEASE_BUILD) -o $(DIST_DIR)/image/host-$$os-$$arch ./cmd/host || exit 1; \
		GOOS=$$os GOARCH=$$arch $(RELEASE_BUILD) -o $(DIST_DIR)/image/probe-$$os-$$arch ./cmd/probe || exit 1; \
	done
	cd $(RELEASE_TOOLS) && GOWORK=off go run ./image -bin $(abspath $(DIST_DIR)/image) -platforms "$(IMAGE_PLATFORMS)" \
		-ref $(HOST_IMAGE_REPOSITORY):$(SDK_VERSION) -version $(SDK_VERSION) -source $(RELEASE_SOURCE) \
		-revision "$$(git rev-parse HEAD 2>/dev/null)" -created $(SOURCE_DATE_EPOCH) -o $(abspath $(DIST_DIR))/polyop-host-$(SDK_VERSION).oci.tar

# release-checksums writes DIST_DIR/SHA256SUMS, in sha256sum's format, over
# every file at DIST_DIR's top level: what a maintainer attaches to the
# release page (the archives, their SBOMs, the image tarball). `release` runs
# it last; `sha256sum -c SHA256SUMS` in DIST_DIR checks them.
.PHONY: release-checksums
release-checksums: ## Write DIST_DIR/SHA256SUMS over the files at DIST_DIR's top level (archives, SBOMs, image tarball).
	@cd $(DIST_DIR) && rm -f SHA256SUMS && LC_ALL=C && files=() && \
	for f in *; do if [ -f "$$f" ]; then files+=("$$f"); fi; done; \
	[ $${#files[@]} -gt 0 ] || { echo "no file in $(DIST_DIR) to checksum: run make release-binaries or release-image first"; exit 1; }; \
	sha256sum -- "$${files[@]}" >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS
	@echo "Wrote $(DIST_DIR)/SHA256SUMS:" && cat $(DIST_DIR)/SHA256SUMS

.PHONY: release-goproxy
release-goproxy: ## Write the Go modules a release tags (v$(SDK_VERSION), sdk/go/v$(SDK_VERSION)) into DIST_DIR/goproxy, a folder GOPROXY=file:// serves.
	rm -rf $(DIST_DIR)/goproxy
	go run ./hack/goproxy -out $(DIST_DIR)/goproxy -version $(SDK_VERSION)

##@ Deployment

# The examples config/overlays deploys, one folder each. For an example NAME,
# NAME_BUILD builds its sidecar, NAME_SIDECAR is the command that serves it
# (make manifests appends the address), NAME_CRDS is the folder of its CRDs and
# NAME_DOCKERFILE builds its image.
EXAMPLES ?= go-maintenancewindow go-memcached go-website python-tenant typescript-configmapsync
go-maintenancewindow_BUILD = go build -o $(LOCALBIN)/maintenancewindow-sidecar ./examples/go/maintenancewindow
go-maintenancewindow_SIDECAR = $(LOCALBIN)/maintenancewindow-sidecar --address
go-maintenancewindow_CRDS = examples/go/maintenancewindow/config/crd
go-maintenancewindow_DOCKERFILE = examples/go/maintenancewindow/Dockerfile
go-memcached_BUILD = go build -o $(LOCALBIN)/memcached-sidecar ./examples/go/memcached
go-memcached_SIDECAR = $(LOCALBIN)/memcached-sidecar --address
go-memcached_CRDS = examples/go/memcached/config/crd
go-memcached_DOCKERFILE = examples/go/memcached/Dockerfile
go-website_BUILD = go build -o $(LOCALBIN)/website-sidecar ./examples/go/website
go-website_SIDECAR = $(LOCALBIN)/website-sidecar --address
go-website_CRDS = examples/go/website/config/crd
go-website_DOCKERFILE = examples/go/website/Dockerfile
python-tenant_BUILD = @: installed in $(VENV) by $(VENV_STAMP)
python-tenant_SIDECAR = $(VENV)/bin/tenant-sidecar --address
python-tenant_CRDS = examples/python/tenant/config/crd
python-tenant_DOCKERFILE = examples/python/tenant/Dockerfile
typescript-configmapsync_BUILD = node_modules/.bin/tsc -b examples/typescript/configmapsync
typescript-configmapsync_SIDECAR = node examples/typescript/configmapsync/dist/main.js --address
typescript-configmapsync_CRDS = examples/typescript/configmapsync/config/crd
typescript-configmapsync_DOCKERFILE = examples/typescript/configmapsync/Dockerfile

# What deploy, undeploy, install, uninstall and docker-build act on: an overlay
# of config/overlays, EXAMPLE/VARIANT (certmanager: cert-manager issues the
# webhook certificate; selfsigned: the host makes it), and the images.
OVERLAY ?= go-maintenancewindow/certmanager
EXAMPLE = $(firstword $(subst /, ,$(OVERLAY)))
IMG ?= polyop-host:dev
SIDECAR_IMG ?= polyop-$(EXAMPLE):dev
CONTAINER_TOOL ?= docker
KUBECTL ?= kubectl
# kubectl's built-in kustomize, from the control-plane build.
KUSTOMIZE ?= $(ENVTEST_ASSETS)/kubectl kustomize
ignore-not-found ?= false

# example-manifests generates config/overlays/$(1)/generated.
define example-manifests
	$($(1)_BUILD)
	hack/manifests.sh $(LOCALBIN)/host config/overlays/$(1)/generated $($(1)_CRDS) $($(1)_SIDECAR)

endef

.PHONY: manifests
manifests: generate-examples $(ENVTEST_ASSETS)/kubectl $(VENV_STAMP) $(NODE_MODULES_STAMP) | $(LOCALBIN) ## Generate each example's CRDs, RBAC and webhook configurations from its sidecar's description; render every overlay into bin/manifests.
	go build -o $(LOCALBIN)/host ./cmd/host
	$(foreach example,$(EXAMPLES),$(call example-manifests,$(example)))
	@for k in config/overlays/*/*/kustomization.yaml; do \
		dir=$${k%/kustomization.yaml}; \
		case $$dir in */generated) continue ;; esac; \
		grep -q '^kind: Component' $$k && continue; \
		out=$(LOCALBIN)/manifests/$${dir#config/overlays/}.yaml; \
		mkdir -p $$(dirname $$out); \
		echo "Rendering $$dir into $$out"; \
		$(KUSTOMIZE) $$dir >$$out; \
	done

.PHONY: install
install: $(ENVTEST_ASSETS)/kubectl ## Install the CRDs of OVERLAY's example into the cluster of your kubeconfig.
	$(KUSTOMIZE) config/overlays/$(EXAMPLE)/generated/crd | $(KUBECTL) apply -f -

.PHONY: uninstall
uninstall: $(ENVTEST_ASSETS)/kubectl ## Uninstall the CRDs of OVERLAY's example. Call with ignore-not-found=true to ignore resource not found errors.
	$(KUSTOMIZE) config/overlays/$(EXAMPLE)/generated/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

# deploy renders OVERLAY through a throwaway kustomization in bin/ that sets
# the images, so no committed file changes.
.PHONY: deploy
deploy: $(ENVTEST_ASSETS)/kubectl | $(LOCALBIN) ## Deploy OVERLAY to the cluster of your kubeconfig, with the images IMG (host) and SIDECAR_IMG.
	@mkdir -p bin; tmp=$$(mktemp -d bin/deploy.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	printf '%s\n' 'resources:' '- ../../config/overlays/$(OVERLAY)' 'images:' \
		'- name: host' '  newName: $(IMG)' '- name: sidecar' '  newName: $(SIDECAR_IMG)' >"$$tmp/kustomization.yaml"; \
	$(KUSTOMIZE) "$$tmp" | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: $(ENVTEST_ASSETS)/kubectl ## Remove OVERLAY from the cluster. Call with ignore-not-found=true to ignore resource not found errors.
	$(KUSTOMIZE) config/overlays/$(OVERLAY) | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

# The images build from the repository root, where the Go module is; building
# them takes Docker (or CONTAINER_TOOL=podman), which the tests do not need.
.PHONY: docker-build
docker-build: ## Build the host image IMG and the image SIDECAR_IMG of OVERLAY's example sidecar.
	$(CONTAINER_TOOL) build -t $(IMG) .
	$(CONTAINER_TOOL) build -t $(SIDECAR_IMG) -f $($(EXAMPLE)_DOCKERFILE) .

.PHONY: docker-push
docker-push: ## Push IMG and SIDECAR_IMG.
	$(CONTAINER_TOOL) push $(IMG)
	$(CONTAINER_TOOL) push $(SIDECAR_IMG)

##@ Dependencies

.PHONY: tools
tools: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(CONTROLLER_GEN) $(GOLANGCI_LINT) ## Install the pinned tools into bin/.

.PHONY: venv .venv
venv: .venv ## Make the Python virtualenv .venv from the pinned requirements (once per change of the pins).
.venv: $(VENV_STAMP)

$(VENV_STAMP):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { \
		echo "$(PYTHON) is older than Python 3.10: set PYTHON to a newer one"; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -r $(PYTHON_REQUIREMENTS)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation $(addprefix -e ,$(PYTHON_PACKAGES))
	$(VENV)/bin/pip check --disable-pip-version-check
	touch $@

.PHONY: node_modules
node_modules: $(NODE_MODULES_STAMP) ## Install the TypeScript packages from package-lock.json (npm ci; once per change of the lockfile).

$(NODE_MODULES_STAMP):
	@command -v node >/dev/null || { echo "node is not installed: the TypeScript SDK needs Node.js 20 or later"; exit 1; }
	$(NPM) ci --no-audit --no-fund
	@# Some npm packages ship Go files (flatted does); a go.mod makes
	@# node_modules a module of its own, which ./... does not enter.
	printf 'module node_modules\n' > node_modules/go.mod
	touch $@

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
$(eval $(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION)))

# The control-plane binaries are files named by version: each built when
# missing, or when the tools module changes, by the hidden `polyop envtest`
# command, the code polyop run builds a user's control plane with: a go build
# reporting the packages compiled every few seconds (the first build takes
# several minutes), the binary renamed into place once built. It checks that
# the tools module builds K8S_VERSION.
ENVTEST_MODULE_FILES := $(ENVTEST_MODULE)/go.mod $(ENVTEST_MODULE)/go.sum $(ENVTEST_MODULE)/etcd/main.go

$(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd $(ENVTEST_ASSETS)/kubectl: $(ENVTEST_MODULE_FILES) | $(LOCALBIN)
	go build -o $(LOCALBIN)/polyop ./cmd/polyop
	$(LOCALBIN)/polyop envtest --source $(ENVTEST_MODULE) --version $(K8S_VERSION) --dir $(@D) --only $(@F) --rebuild

.PHONY: FORCE
FORCE:

# print-VAR prints a variable's value, e.g. make print-K8S_VERSION.
print-%:
	@echo '$($*)'
