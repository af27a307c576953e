package scaffold

import "strings"

// writeMakefile writes the project's Makefile and README around the
// language's Tasks: the targets and their documentation are the same in
// every language, the recipes the language's. A task the language leaves
// empty has no target and no line in the README.
func writeMakefile(w *Writer, p *Project, t Tasks) error {
	data := struct {
		*Project
		Tasks        Tasks
		LanguageName string
		HostImage    string
		SidecarImage string
		Namespace    string
		// Setup is the setup target, a prerequisite of the others, or ""
		// when the language has no setup.
		Setup string
		// Deps and Clean are Tasks.Deps and Tasks.Clean as prose lists.
		Deps, Clean string
		// Readme is Tasks.Readme without surrounding blank lines.
		Readme string
	}{p, t, languageName(p.Language), HostImage(p.PolyopVersion), SidecarImage(p), Namespace(p), "",
		strings.Join(t.Deps, ", "), strings.Join(t.Clean, ", "), strings.TrimSpace(t.Readme)}
	if len(t.Setup) > 0 {
		data.Setup = "setup"
	}
	if err := w.Template("Makefile", makefileTemplate, data); err != nil {
		return err
	}
	return w.Template("README.md", readmeTemplate, data)
}

// languageName is l as prose writes it.
func languageName(l Language) string {
	switch l {
	case Go:
		return "Go"
	case Python:
		return "Python"
	case TypeScript:
		return "TypeScript"
	}
	return strings.ToUpper(string(l[:1])) + string(l[1:])
}

// makefileTemplate is every project's Makefile. Targets are documented with
// "## " after their prerequisites and grouped under "##@ " lines, as
// kubebuilder's Makefile is: make help lists them.
const makefileTemplate = `# [[.Name]]: a polyop operator whose sidecar is written in [[.LanguageName]].
# make help lists the targets; README.md explains them.

# The sidecar's image: docker-build builds it, deploy runs it next to the
# polyop host ([[.HostImage]], set in config/default).
IMG ?= [[.SidecarImage]]
# The polyop command, of the version in PROJECT ([[.PolyopVersion]]).
POLYOP ?= polyop
KUBECTL ?= kubectl
KUSTOMIZE ?= $(KUBECTL) kustomize
# The container tool that builds and pushes the image (docker or podman).
CONTAINER_TOOL ?= docker
# The entry of config/ that deploy and undeploy render: default (the host makes
# its webhook certificate) or default-certmanager (cert-manager makes it).
OVERLAY ?= default
# Set to true to ignore objects already gone in uninstall and undeploy.
ignore-not-found ?= false

# Every recipe runs in one bash, stopping at the first error.
SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: [[if .Tasks.Build]]build[[else if .Tasks.Test]]test[[else]]help[[end]]

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development
[[- if .Tasks.Setup]]

.PHONY: setup
[[- if .Tasks.Stamp]]
setup: [[.Tasks.Stamp]] ## Install the project's dependencies[[if .Deps]] (again after a change to [[.Deps]])[[end]].

[[.Tasks.Stamp]]:[[range .Tasks.Deps]] [[.]][[end]]
[[- range .Tasks.Setup]]
	[[.]]
[[- end]]
[[- else]]
setup: ## Install the project's dependencies.
[[- range .Tasks.Setup]]
	[[.]]
[[- end]]
[[- end]]
[[- end]]

.PHONY: manifests
manifests: [[.Setup]] ## Generate the CRDs (config/crd), the host's RBAC (config/rbac/role.yaml) and the webhook configurations (config/webhook) from the code.
	$(POLYOP) generate

.PHONY: generate
generate: [[.Setup]] ## Same as manifests: polyop generate.
	$(POLYOP) generate
[[- if .Tasks.Lint]]

.PHONY: lint
lint: [[.Setup]] ## Run the language's checks.
[[- range .Tasks.Lint]]
	[[.]]
[[- end]]
[[- end]]
[[- if .Tasks.Test]]

.PHONY: test
test: [[.Setup]] ## Run the tests (no cluster needed).
[[- range .Tasks.Test]]
	[[.]]
[[- end]]
[[- end]]

##@ Build
[[- if .Tasks.Build]]

.PHONY: build
build: [[.Setup]] ## Build the sidecar.
[[- range .Tasks.Build]]
	[[.]]
[[- end]]
[[- end]]

.PHONY: run
run: manifests ## Run the host and the sidecar against the cluster of your kubeconfig, or a local control plane: polyop run.
	$(POLYOP) run

.PHONY: docker-build
docker-build: ## Build the sidecar's image IMG.
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the sidecar's image IMG.
	$(CONTAINER_TOOL) push $(IMG)
[[- if .Tasks.Clean]]

.PHONY: clean
clean: ## Remove what the build and setup made.
	rm -rf[[range .Tasks.Clean]] [[.]][[end]]
[[- end]]

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of your kubeconfig.
	$(KUSTOMIZE) config/crd | $(KUBECTL) apply -f -

.PHONY: uninstall
uninstall: ## Uninstall the CRDs from the cluster of your kubeconfig. Call with ignore-not-found=true to ignore resource not found errors.
	$(KUSTOMIZE) config/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

# deploy renders config/$(OVERLAY) through a throwaway kustomization in bin/
# (kustomize loads only bases below or beside it) that sets the sidecar's
# image to IMG, so no committed file changes. containers/1 is the
# sidecar (config/polyop/manager/manager.yaml).
.PHONY: deploy
deploy: manifests ## Deploy the operator (config/$(OVERLAY)) with the sidecar image IMG to the cluster of your kubeconfig.
	@mkdir -p bin; tmp=$$(mktemp -d bin/deploy.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	printf '%s\n' 'resources:' '- ../../config/$(OVERLAY)' 'patches:' '- target:' '    kind: Deployment' '  patch: |-' \
		'    - op: replace' '      path: /spec/template/spec/containers/1/image' '      value: $(IMG)' >"$$tmp/kustomization.yaml"; \
	$(KUSTOMIZE) "$$tmp" | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: ## Remove the operator (config/$(OVERLAY)) from the cluster of your kubeconfig. Call with ignore-not-found=true to ignore resource not found errors.
	$(KUSTOMIZE) config/$(OVERLAY) | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -
`

// readmeTemplate is every project's README.
const readmeTemplate = `# [[.Name]]

A Kubernetes operator made with [polyop](https://github.com/polyop/polyop) [[.PolyopVersion]].
Its pod runs two containers: the polyop host ([[.HostImage]]), a generic
controller-runtime manager that watches the cluster, serves the webhooks and
applies what the sidecar decides; and the sidecar, this project's
[[.LanguageName]] code, which the host calls over gRPC to reconcile, default,
validate and convert the project's kinds. The sidecar describes itself to the
host: its controllers, the kinds they own and watch, and its webhooks.

## Getting started

You need polyop [[.PolyopVersion]] (` + "`polyop version`" + `), kubectl, a container tool
(docker or podman) and the [[.LanguageName]] toolchain.

` + "```sh" + `
# Add a kind: its types, a reconciler, a sample and a test
polyop create api --group apps --version v1 --kind Widget --namespaced --resource --controller
# Add its defaulting and validation webhooks
polyop create webhook --group apps --version v1 --kind Widget --defaulting --programmatic-validation
make manifests   # CRDs, RBAC and webhook configurations from the code
make test        # the unit tests, no cluster needed
make run         # the host and the sidecar on your machine
kubectl apply -k config/samples
` + "```" + `

` + "`make run`" + ` runs ` + "`polyop run`" + `: it uses the cluster of your kubeconfig, or
starts a local control plane when there is none; installs the CRDs; starts the
host and the sidecar, with the webhooks wired to your machine; and prints the
kubeconfig, health and metrics addresses. Ctrl-C stops everything and removes
what it made.

## Make targets

` + "`make help`" + ` lists them.

| Target | What it does |
| --- | --- |
| ` + "`help`" + ` | Lists the targets. |
[[- if .Tasks.Setup]]
| ` + "`setup`" + ` | Installs the project's dependencies; every other target runs it [[if .Deps]]when [[.Deps]] changed[[else]]first[[end]]. |
[[- end]]
| ` + "`manifests`" + `, ` + "`generate`" + ` | Run ` + "`polyop generate`" + `: the CRDs in config/crd/bases from the types, then, from the description the sidecar gives of itself, the host's RBAC (config/rbac/role.yaml) and the webhook configurations (config/webhook). Run it after changing the types, the controllers or the webhooks. |
[[- if .Tasks.Lint]]
| ` + "`lint`" + ` | Runs the language's checks. |
[[- end]]
[[- if .Tasks.Test]]
| ` + "`test`" + ` | Runs the tests on the SDK's harness, without a cluster. |
[[- end]]
[[- if .Tasks.Build]]
| ` + "`build`" + ` | Builds the sidecar. |
[[- end]]
| ` + "`run`" + ` | Runs the host and the sidecar locally: ` + "`polyop run`" + `. |
| ` + "`docker-build`" + `, ` + "`docker-push`" + ` | Build and push the sidecar's image, ` + "`IMG`" + ` (default ` + "`[[.SidecarImage]]`" + `), with ` + "`CONTAINER_TOOL`" + ` (default docker). |
| ` + "`install`" + `, ` + "`uninstall`" + ` | Apply the CRDs to the cluster of your kubeconfig, or delete them (` + "`ignore-not-found=true`" + ` ignores those already gone). |
| ` + "`deploy`" + `, ` + "`undeploy`" + ` | Deploy the operator (config/default, or ` + "`OVERLAY=default-certmanager`" + `) with the sidecar image ` + "`IMG`" + `, or remove it. |
[[- if .Tasks.Clean]]
| ` + "`clean`" + ` | Removes [[.Clean]]. |
[[- end]]

The variables ` + "`POLYOP`" + ` (default polyop), ` + "`KUBECTL`" + ` (default kubectl) and
` + "`CONTAINER_TOOL`" + ` choose the commands the targets run.

## Layout

- ` + "`PROJECT`" + `: the language, the domain and the kinds, which polyop commands read
  to know where to write. ` + "`polyop create`" + ` keeps it up to date.
- ` + "`config/default`" + `: deploys the operator into the namespace ` + "`[[.Namespace]]`" + `, every
  name prefixed with ` + "`[[.Name]]-`" + `, the host making its webhook server's certificate
  itself. ` + "`config/default-certmanager`" + `: the same with the certificate from
  [cert-manager](https://cert-manager.io). Both pin the host image to
  ` + "`[[.HostImage]]`" + ` and name the sidecar image ` + "`[[.SidecarImage]]`" + `; uncomment their
  Prometheus and network policy components there.
- ` + "`config/crd`" + `: the CRDs (` + "`bases/`" + `, one file per kind) and their kustomization,
  written by ` + "`make manifests`" + `.
- ` + "`config/rbac/role.yaml`" + `: the host's RBAC for what the sidecar declares, written
  by ` + "`make manifests`" + `. Grant what the sidecar does through the Cluster service beyond
  its declared kinds in a file of your own beside it.
- ` + "`config/webhook`" + `: the webhook configurations and CRD conversion stanzas, written
  by ` + "`make manifests`" + ` (no objects while the sidecar declares no webhooks).
- ` + "`config/sidecar`" + `: the sidecar container's arguments in the pod.
- ` + "`config/samples`" + `: one sample object per kind.
- ` + "`config/polyop`" + `: polyop's own kustomize base (the pod, the ServiceAccount, the
  metrics Service, the webhook Service, the certificate variants), as polyop
  [[.PolyopVersion]] made it.
[[- if .Readme]]

## The [[.LanguageName]] code

[[.Readme]]
[[- end]]

## Deploying

` + "```sh" + `
make docker-build docker-push IMG=<registry>/[[.Name]]-sidecar:<tag>
make deploy IMG=<registry>/[[.Name]]-sidecar:<tag>
# or, with cert-manager installed in the cluster:
make deploy OVERLAY=default-certmanager IMG=<registry>/[[.Name]]-sidecar:<tag>
kubectl apply -k config/samples
make undeploy
` + "```" + `

The host image, ` + "`[[.HostImage]]`" + `, is polyop's: build it from polyop's repository
(` + "`make docker-build IMG=[[.HostImage]]`" + ` at the tag v[[.PolyopVersion]]) and push it where
your cluster pulls from, or set another in config/default's ` + "`images:`" + `.

## Learn more

- [polyop](https://github.com/polyop/polyop#readme): the host, the SDKs and the commands.
- [The sidecar protocol](https://github.com/polyop/polyop/blob/main/docs/protocol.md): what
  the host asks of the sidecar.
`
