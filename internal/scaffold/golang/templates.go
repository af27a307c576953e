package golang

// The templates of a Go project's files. They use [[ ]] as delimiters (see
// scaffold.Render) and see a data.

const goModTemplate = `module [[.P.Repo]]

go [[.GoVersion]]

require (
	github.com/polyop/polyop/sdk/go [[.SDKVersion]]
[[- range .Requires]]
	[[.Path]] [[.Version]]
[[- end]]
)
[[- if .P.SDKSource]]

// The Go SDK comes from a checkout of polyop (polyop init --sdk-source) until
// the project depends on a published version: remove this line then.
replace github.com/polyop/polyop/sdk/go => [[.P.SDKSource]]/sdk/go
[[- end]]
`

const mainTemplate = `// Command sidecar is the [[.P.Name]] sidecar: the polyop host calls its
// reconcilers and webhooks over gRPC.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/polyop/polyop/sdk/go/sidecar"
	// +polyop:scaffold:imports
)

// name is the sidecar's name, as the host sees it.
const name = "[[.P.Name]]"

func main() {
	address := flag.String("address", sidecar.DefaultAddress,
		"Where to serve the sidecar API: unix:///abs/path.sock, unix:rel/path.sock, tcp://host:port or host:port.")
	opts := sidecar.Options{Name: name}
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	srv, err := newServer(opts)
	if err != nil {
		ctrl.Log.Error(err, "Setting up the sidecar")
		os.Exit(1)
	}
	if err := srv.Serve(ctrl.SetupSignalHandler(), *address); err != nil {
		ctrl.Log.Error(err, "Serving the sidecar", "address", *address)
		os.Exit(1)
	}
}

// newScheme returns a scheme with the built-in kinds and the project's.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// +polyop:scaffold:scheme
	return scheme, nil
}

// newServer returns the sidecar with its controllers and webhooks
// registered. polyop create api and create webhook add them above the
// markers.
func newServer(opts sidecar.Options) (*sidecar.Server, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	opts.Scheme = scheme
	srv, err := sidecar.New(opts)
	if err != nil {
		return nil, err
	}
	// +polyop:scaffold:controllers
	// +polyop:scaffold:webhooks
	return srv, nil
}
`

const mainTestTemplate = `package main

import (
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func TestTheSidecarDescribesItself(t *testing.T) {
	srv, err := newServer(sidecar.Options{Name: name, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	resp := sidecartest.New(t, srv).Describe()
	if resp.GetName() != name {
		t.Errorf("the sidecar is named %q, want %q", resp.GetName(), name)
	}
}
`

// boilerplate heads the files controller-gen writes
// (object:headerFile=hack/boilerplate.go.txt).
const boilerplate = `/*
Copyright [[.P.Name]] authors.
*/
`

const dockerfileTemplate = `# The [[.P.Name]] sidecar's image: a static binary on a distroless base image,
# run as a non-root user, as a kubebuilder project builds its manager. The
# polyop host runs beside it in the same pod (config/).
[[- if .P.SDKSource]]
#
# go.mod takes the Go SDK from [[.P.SDKSource]]/sdk/go, outside the build
# context: run go mod vendor first, or depend on a published SDK version.
[[- end]]
ARG GO_IMAGE=golang:1.26

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
# The modules first: a source change then reuses the download layer.
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY api/ api/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
	go build -trimpath -ldflags "-s -w" -o sidecar ./cmd/sidecar

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/sidecar .
# The host's user: the host and the sidecar share a socket in an emptyDir.
USER 65532:65532
ENTRYPOINT ["/sidecar"]
`

const dockerignore = `# Only what the image is built from.
bin/
cover.out
config/
`

const gitignore = `# Binaries and tools (make builds them into bin/).
bin/
*.exe
*.test

# Test output.
cover.out
*.out

# Editors.
.idea/
.vscode/
*.swp
*~
`

const apiDocTemplate = `// Package api holds the project's kinds, one package per version
// (api/<version>): polyop create api adds them. polyop generate (make
// manifests) writes their CRDs from the kubebuilder markers on the types.
package api
`

const controllerDocTemplate = `// Package controller holds the project's reconcilers, one per kind: polyop
// create api adds them and registers them in cmd/sidecar/main.go.
package controller
`

const groupVersionTemplate = `// Package [[.R.Version]] contains the [[.R.APIGroup]] [[.R.Version]] API.
// +kubebuilder:object:generate=true
// +groupName=[[.R.APIGroup]]
package [[.R.Version]]

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "[[.R.APIGroup]]", Version: "[[.R.Version]]"}

	// SchemeBuilder registers this API's types in a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
`

const typesTemplate = `package [[.R.Version]]

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Edit the types: they are the [[.R.Kind]] CRD's schema. Run polyop generate
// (make manifests) after a change to regenerate the CRD and the deep copy
// functions. The markers are kubebuilder's, read by controller-gen: put
// the validation, default and enum markers of a field on the lines above
// it (the list: https://book.kubebuilder.io/reference/markers/crd-validation).

// [[.R.Kind]]Spec is the desired state of a [[.R.Kind]].
type [[.R.Kind]]Spec struct {
	// Message is what the [[.R.Kind]]'s ConfigMap holds.
	// +optional
	Message string ` + "`" + `json:"message,omitempty"` + "`" + `
}

// [[.R.Kind]]Status is the observed state of a [[.R.Kind]].
type [[.R.Kind]]Status struct {
	// Conditions are the [[.R.Kind]]'s conditions; Ready says whether it is
	// reconciled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition ` + "`" + `json:"conditions,omitempty"` + "`" + `

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 ` + "`" + `json:"observedGeneration,omitempty"` + "`" + `
}

// [[.R.Kind]] is the Schema for the [[.R.Plural]] API.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=[[.R.Plural]],scope=[[if .R.Namespaced]]Namespaced[[else]]Cluster[[end]]
[[- if .IsHub]]
// +kubebuilder:storageversion
[[- end]]
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type [[.R.Kind]] struct {
	metav1.TypeMeta   ` + "`" + `json:",inline"` + "`" + `
	metav1.ObjectMeta ` + "`" + `json:"metadata,omitempty"` + "`" + `

	// +optional
	Spec [[.R.Kind]]Spec ` + "`" + `json:"spec,omitzero"` + "`" + `
	// +optional
	Status [[.R.Kind]]Status ` + "`" + `json:"status,omitzero"` + "`" + `
}

// [[.R.Kind]]List is a list of [[.R.Kind]] objects.
// +kubebuilder:object:root=true
type [[.R.Kind]]List struct {
	metav1.TypeMeta ` + "`" + `json:",inline"` + "`" + `
	metav1.ListMeta ` + "`" + `json:"metadata,omitempty"` + "`" + `
	Items           [][[.R.Kind]] ` + "`" + `json:"items"` + "`" + `
}

func init() {
	SchemeBuilder.Register(&[[.R.Kind]]{}, &[[.R.Kind]]List{})
}
`

// deepCopyHeaderTemplate and deepCopyFuncsTemplate write what controller-gen
// object writes for the scaffolded types.
const deepCopyHeaderTemplate = `//go:build !ignore_autogenerated

/*
Copyright [[.P.Name]] authors.
*/

// Code generated by controller-gen. DO NOT EDIT.

package [[.R.Version]]

import (
	[[if eq .MetaAlias "metav1"]]metav1 [[end]]"k8s.io/apimachinery/pkg/apis/meta/v1"
	runtime "k8s.io/apimachinery/pkg/runtime"
)
`

const deepCopyFuncsTemplate = `
// DeepCopyInto is an autogenerated deepcopy function, copying the receiver, writing into out. in must be non-nil.
func (in *[[.R.Kind]]) DeepCopyInto(out *[[.R.Kind]]) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy is an autogenerated deepcopy function, copying the receiver, creating a new [[.R.Kind]].
func (in *[[.R.Kind]]) DeepCopy() *[[.R.Kind]] {
	if in == nil {
		return nil
	}
	out := new([[.R.Kind]])
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject is an autogenerated deepcopy function, copying the receiver, creating a new runtime.Object.
func (in *[[.R.Kind]]) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto is an autogenerated deepcopy function, copying the receiver, writing into out. in must be non-nil.
func (in *[[.R.Kind]]List) DeepCopyInto(out *[[.R.Kind]]List) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		in, out := &in.Items, &out.Items
		*out = make([][[.R.Kind]], len(*in))
		for i := range *in {
			(*in)[i].DeepCopyInto(&(*out)[i])
		}
	}
}

// DeepCopy is an autogenerated deepcopy function, copying the receiver, creating a new [[.R.Kind]]List.
func (in *[[.R.Kind]]List) DeepCopy() *[[.R.Kind]]List {
	if in == nil {
		return nil
	}
	out := new([[.R.Kind]]List)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject is an autogenerated deepcopy function, copying the receiver, creating a new runtime.Object.
func (in *[[.R.Kind]]List) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto is an autogenerated deepcopy function, copying the receiver, writing into out. in must be non-nil.
func (in *[[.R.Kind]]Spec) DeepCopyInto(out *[[.R.Kind]]Spec) {
	*out = *in
}

// DeepCopy is an autogenerated deepcopy function, copying the receiver, creating a new [[.R.Kind]]Spec.
func (in *[[.R.Kind]]Spec) DeepCopy() *[[.R.Kind]]Spec {
	if in == nil {
		return nil
	}
	out := new([[.R.Kind]]Spec)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto is an autogenerated deepcopy function, copying the receiver, writing into out. in must be non-nil.
func (in *[[.R.Kind]]Status) DeepCopyInto(out *[[.R.Kind]]Status) {
	*out = *in
	if in.Conditions != nil {
		in, out := &in.Conditions, &out.Conditions
		*out = make([][[.MetaAlias]].Condition, len(*in))
		for i := range *in {
			(*in)[i].DeepCopyInto(&(*out)[i])
		}
	}
}

// DeepCopy is an autogenerated deepcopy function, copying the receiver, creating a new [[.R.Kind]]Status.
func (in *[[.R.Kind]]Status) DeepCopy() *[[.R.Kind]]Status {
	if in == nil {
		return nil
	}
	out := new([[.R.Kind]]Status)
	in.DeepCopyInto(out)
	return out
}
`

const controllerTemplate = `package controller

import (
	"context"
[[- if .R.Namespaced]]
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
[[- end]]
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	[[.Alias .R]] "[[.APIImport .R]]"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// [[.Reconciler]]Name is the name of the [[.R.Kind]] controller, as the
// host knows it.
const [[.Reconciler]]Name = "[[.ControllerName]]"

// [[.Reconciler]] reconciles [[.R.Kind]] objects.
type [[.Reconciler]] struct{}

// SetupWithServer registers the controller on srv.
func (r *[[.Reconciler]]) SetupWithServer(srv *sidecar.Server) error {
	return sidecar.NewControllerManagedBy[*[[.Alias .R]].[[.R.Kind]]](srv).
		Named([[.Reconciler]]Name).
[[- if .R.Namespaced]]
		Owns(&corev1.ConfigMap{}).
[[- end]]
		Complete(r)
}

// Reconcile [[if .R.Namespaced]]declares the [[.R.Kind]]'s one child, a ConfigMap of the same
// name holding spec.message, and [[end]]reports the [[.R.Kind]] Ready. The host
// [[- if .R.Namespaced]] applies the
// children with server-side apply, makes the [[.R.Kind]] their owner, deletes
// those no longer declared and[[end]] writes the status.
func (r *[[.Reconciler]]) Reconcile(ctx context.Context, obj *[[.Alias .R]].[[.R.Kind]]) (sidecar.Result, error) {
	log := logf.FromContext(ctx)
[[- if .R.Namespaced]]

	// The host sets the namespace (the object's) and the owner reference.
	err := sidecar.Desire(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: obj.Name},
		Data:       map[string]string{"message": obj.Spec.Message},
	})
	if err != nil {
		return sidecar.Result{}, fmt.Errorf("declaring the ConfigMap of [[.R.Kind]] %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	// These are all the children: the host deletes the ones no longer
	// declared.
	sidecar.DesiredComplete(ctx)
[[- end]]

	obj.Status.ObservedGeneration = obj.Generation
	conditions.MarkTrue(&obj.Status.Conditions, conditions.Ready, "Reconciled", "The [[.R.Kind]] is reconciled", obj.Generation)
	log.V(1).Info("Reconciled")
	return sidecar.Result{}, nil
}
`

const controllerTestTemplate = `package controller_test

import (
	"testing"

	"github.com/go-logr/logr/testr"
[[- if .R.Namespaced]]
	corev1 "k8s.io/api/core/v1"
[[- end]]
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	[[.Alias .R]] "[[.APIImport .R]]"
	"[[.P.Repo]]/internal/controller"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
)

func new[[.Reconciler]]Harness(t *testing.T) *sidecartest.Harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := [[.Alias .R]].AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controller.[[.Reconciler]]{}).SetupWithServer(srv); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv)
}

func Test[[.Reconciler]]MakesTheChildAndReportsReady(t *testing.T) {
	h := new[[.Reconciler]]Harness(t)
	obj := &[[.Alias .R]].[[.R.Kind]]{
		ObjectMeta: metav1.ObjectMeta{[[if .R.Namespaced]]Namespace: "default", [[end]]Name: "[[.SampleName]]", Generation: 2},
		Spec:       [[.Alias .R]].[[.R.Kind]]Spec{Message: "[[.SampleMessage]]"},
	}
	res := h.Reconcile(t.Context(), controller.[[.Reconciler]]Name, obj)
	if res.Err != nil {
		t.Fatalf("reconcile failed: %s", res.Err.Message)
	}
[[- if .R.Namespaced]]

	children := res.DesiredChildren()
	if len(children) != 1 {
		t.Fatalf("%d children, want one ConfigMap", len(children))
	}
	var cm corev1.ConfigMap
	res.DesiredChild("ConfigMap", obj.Name, &cm)
	if cm.Data["message"] != obj.Spec.Message {
		t.Errorf("the ConfigMap holds %q, want %q", cm.Data["message"], obj.Spec.Message)
	}
[[- end]]

	var got [[.Alias .R]].[[.R.Kind]]
	res.Status(&got)
	ready := conditions.Get(got.Status.Conditions, conditions.Ready)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != "Reconciled" || ready.ObservedGeneration != 2 {
		t.Errorf("Ready = %+v, want True, Reconciled, at generation 2", ready)
	}
	if got.Status.ObservedGeneration != 2 {
		t.Errorf("status.observedGeneration = %d, want 2", got.Status.ObservedGeneration)
	}
}
`

// webhookTemplate starts a version's webhook file: the builder, to which
// the handlers' blocks add themselves above the markers.
const webhookTemplate = `package [[.R.Version]]

import (
	[[.Alias .R]] "[[.APIImport .R]]"
	"github.com/polyop/polyop/sdk/go/sidecar"
	// +polyop:scaffold:imports
)

// Setup[[.R.Kind]]WebhookWithServer registers the [[.R.Kind]] [[.R.Version]] webhooks on srv.
[[- if .IsHub]]
// When the kind has other versions in the scheme, converting to and from
// this one (the hub), the builder registers the conversion too.
[[- end]]
func Setup[[.R.Kind]]WebhookWithServer(srv *sidecar.Server) error {
	return sidecar.NewWebhookManagedBy[*[[.Alias .R]].[[.R.Kind]]](srv).
		// +polyop:scaffold:builder
		Complete()
}
`

// defaulterImports, defaulterBuilder and defaulterTemplate are what a
// defaulting handler adds to its version's webhook file.
var defaulterImports = []string{`"context"`}

const defaulterBuilder = `WithDefaulter(&[[.R.Kind]]CustomDefaulter{}).`

const defaulterTemplate = `
// Default[[.R.Kind]]Message is the spec.message of a [[.R.Kind]] that gives none.
const Default[[.R.Kind]]Message = "[[.SampleMessage]]"

// [[.R.Kind]]CustomDefaulter sets the defaults of a [[.R.Kind]] when it is
// created or updated.
type [[.R.Kind]]CustomDefaulter struct{}

var _ sidecar.Defaulter[*[[.Alias .R]].[[.R.Kind]]] = (*[[.R.Kind]]CustomDefaulter)(nil)

// Default sets spec.message to Default[[.R.Kind]]Message when it is empty.
func (d *[[.R.Kind]]CustomDefaulter) Default(_ context.Context, obj *[[.Alias .R]].[[.R.Kind]]) error {
	if obj.Spec.Message == "" {
		obj.Spec.Message = Default[[.R.Kind]]Message
	}
	return nil
}
`

// validatorImports, validatorBuilder and validatorTemplate are what a
// validation handler adds to its version's webhook file.
var validatorImports = []string{
	`"context"`,
	`"unicode/utf8"`,
	`apierrors "k8s.io/apimachinery/pkg/api/errors"`,
	`"k8s.io/apimachinery/pkg/runtime/schema"`,
	`"k8s.io/apimachinery/pkg/util/validation/field"`,
}

const validatorBuilder = `WithValidator(&[[.R.Kind]]CustomValidator{}).`

const validatorTemplate = `
// Max[[.R.Kind]]MessageLength is the longest spec.message, in characters.
const Max[[.R.Kind]]MessageLength = 64

// [[.R.Kind]]CustomValidator checks a [[.R.Kind]] when it is created or
// updated.
type [[.R.Kind]]CustomValidator struct{}

var _ sidecar.Validator[*[[.Alias .R]].[[.R.Kind]]] = (*[[.R.Kind]]CustomValidator)(nil)

// ValidateCreate checks a new [[.R.Kind]].
func (v *[[.R.Kind]]CustomValidator) ValidateCreate(_ context.Context, obj *[[.Alias .R]].[[.R.Kind]]) (sidecar.Warnings, error) {
	return nil, validate[[.R.Kind]](obj)
}

// ValidateUpdate checks a changed [[.R.Kind]].
func (v *[[.R.Kind]]CustomValidator) ValidateUpdate(_ context.Context, _, obj *[[.Alias .R]].[[.R.Kind]]) (sidecar.Warnings, error) {
	return nil, validate[[.R.Kind]](obj)
}

// ValidateDelete allows every delete (the webhook is not called for deletes
// unless the builder adds sidecar.Delete to its operations).
func (v *[[.R.Kind]]CustomValidator) ValidateDelete(_ context.Context, _ *[[.Alias .R]].[[.R.Kind]]) (sidecar.Warnings, error) {
	return nil, nil
}

// validate[[.R.Kind]] refuses a spec.message longer than
// Max[[.R.Kind]]MessageLength, with a field error kubectl prints as the API
// server's own.
func validate[[.R.Kind]](obj *[[.Alias .R]].[[.R.Kind]]) error {
	var errs field.ErrorList
	if utf8.RuneCountInString(obj.Spec.Message) > Max[[.R.Kind]]MessageLength {
		errs = append(errs, field.TooLongCharacters(field.NewPath("spec", "message"), obj.Spec.Message, Max[[.R.Kind]]MessageLength))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: [[.Alias .R]].GroupVersion.Group, Kind: "[[.R.Kind]]"}, obj.Name, errs)
}
`

// webhookTestTemplate starts a version's webhook test; the handlers' tests
// are added after it.
const webhookTestTemplate = `package [[.R.Version]]_test

import (
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	[[.Alias .R]] "[[.APIImport .R]]"
	webhook[[.Alias .R]] "[[.P.Repo]]/internal/webhook/[[.R.Version]]"
	"github.com/polyop/polyop/sdk/go/sidecar"
	"github.com/polyop/polyop/sdk/go/sidecartest"
	// +polyop:scaffold:imports
)

func new[[.R.Kind]]Harness(t *testing.T) *sidecartest.Harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := [[.Alias .R]].AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	srv, err := sidecar.New(sidecar.Options{Name: "test", Scheme: scheme, Logger: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook[[.Alias .R]].Setup[[.R.Kind]]WebhookWithServer(srv); err != nil {
		t.Fatal(err)
	}
	return sidecartest.New(t, srv)
}

func new[[.R.Kind]](message string) *[[.Alias .R]].[[.R.Kind]] {
	return &[[.Alias .R]].[[.R.Kind]]{
		ObjectMeta: metav1.ObjectMeta{[[if .R.Namespaced]]Namespace: "default", [[end]]Name: "[[.SampleName]]"},
		Spec:       [[.Alias .R]].[[.R.Kind]]Spec{Message: message},
	}
}
`

const defaulterTestTemplate = `
func Test[[.R.Kind]]DefaulterFillsTheMessage(t *testing.T) {
	res := new[[.R.Kind]]Harness(t).Default(t.Context(), new[[.R.Kind]](""))
	if !res.Allowed {
		t.Fatalf("denied: %+v", res.Denial)
	}
	var got [[.Alias .R]].[[.R.Kind]]
	res.Object(&got)
	if got.Spec.Message != webhook[[.Alias .R]].Default[[.R.Kind]]Message {
		t.Errorf("spec.message = %q, want %q", got.Spec.Message, webhook[[.Alias .R]].Default[[.R.Kind]]Message)
	}

	res = new[[.R.Kind]]Harness(t).Default(t.Context(), new[[.R.Kind]]("mine"))
	if res.Object(&got); got.Spec.Message != "mine" {
		t.Errorf("spec.message = %q: the defaulter replaced a message that was set", got.Spec.Message)
	}
}
`

var validatorTestImports = []string{`"strings"`, `"k8s.io/apimachinery/pkg/util/validation/field"`}

const validatorTestTemplate = `
func Test[[.R.Kind]]ValidatorLimitsTheMessage(t *testing.T) {
	h := new[[.R.Kind]]Harness(t)
	for name, tc := range map[string]struct {
		message string
		allowed bool
	}{
		"if the message is 64 characters long, then it is allowed":     {message: strings.Repeat("a", 64), allowed: true},
		"if the message is 64 two-byte characters, then it is allowed": {message: strings.Repeat("é", 64), allowed: true},
		"if the message is 65 characters long, then it is refused":     {message: strings.Repeat("a", 65)},
	} {
		t.Run(name, func(t *testing.T) {
			for op, res := range map[string]*sidecartest.AdmissionResponse{
				"create": h.ValidateCreate(t.Context(), new[[.R.Kind]](tc.message)),
				"update": h.ValidateUpdate(t.Context(), new[[.R.Kind]]("old"), new[[.R.Kind]](tc.message)),
			} {
				if res.Allowed != tc.allowed {
					t.Fatalf("%s: allowed = %v, want %v (%+v)", op, res.Allowed, tc.allowed, res.Denial)
				}
				if tc.allowed {
					continue
				}
				if errs := res.Denial.FieldErrors; len(errs) != 1 || errs[0].Field != "spec.message" || errs[0].Type != field.ErrorTypeTooLong {
					t.Errorf("%s: field errors = %v, want spec.message: Too long", op, errs)
				}
			}
		})
	}
	if res := h.ValidateDelete(t.Context(), new[[.R.Kind]](strings.Repeat("a", 65))); !res.Allowed {
		t.Errorf("delete refused: %+v", res.Denial)
	}
}
`

const hubTemplate = `package [[.R.Version]]

// Hub marks [[.R.Version]], the storage version, as the version every other
// version of [[.R.Kind]] converts to and from (controller-runtime's
// conversion.Hub).
func (*[[.R.Kind]]) Hub() {}
`

const spokeTemplate = `package [[.R.Version]]

import (
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	[[.Alias .Hub]] "[[.APIImport .Hub]]"
)

// ConvertTo converts this [[.R.Kind]] to the hub version, [[.Hub.Version]].
func (src *[[.R.Kind]]) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*[[.Alias .Hub]].[[.R.Kind]])
	if !ok {
		return fmt.Errorf("the hub of [[.R.Kind]] is *[[.Alias .Hub]].[[.R.Kind]], not %T", dstRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec.Message = src.Spec.Message
	dst.Status.Conditions = slices.Clone(src.Status.Conditions)
	dst.Status.ObservedGeneration = src.Status.ObservedGeneration
	return nil
}

// ConvertFrom converts the hub version, [[.Hub.Version]], to this [[.R.Kind]].
func (dst *[[.R.Kind]]) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*[[.Alias .Hub]].[[.R.Kind]])
	if !ok {
		return fmt.Errorf("the hub of [[.R.Kind]] is *[[.Alias .Hub]].[[.R.Kind]], not %T", srcRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec.Message = src.Spec.Message
	dst.Status.Conditions = slices.Clone(src.Status.Conditions)
	dst.Status.ObservedGeneration = src.Status.ObservedGeneration
	return nil
}
`

const conversionTestTemplate = `package [[.R.Version]]

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	[[.Alias .Hub]] "[[.APIImport .Hub]]"
)

func Test[[.R.Kind]]RoundTripsThroughTheHub(t *testing.T) {
	src := &[[.R.Kind]]{
		ObjectMeta: metav1.ObjectMeta{Name: "[[.SampleName]]", Generation: 3},
		Spec:       [[.R.Kind]]Spec{Message: "[[.SampleMessage]]"},
		Status: [[.R.Kind]]Status{
			ObservedGeneration: 3,
			Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reconciled", ObservedGeneration: 3}},
		},
	}
	hub := &[[.Alias .Hub]].[[.R.Kind]]{}
	if err := src.ConvertTo(hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.Message != src.Spec.Message || hub.Status.ObservedGeneration != 3 || len(hub.Status.Conditions) != 1 {
		t.Errorf("[[.Hub.Version]] = %+v, want the [[.R.Version]] fields", hub)
	}
	back := &[[.R.Kind]]{}
	if err := back.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if back.Name != src.Name || back.Spec != src.Spec || back.Status.ObservedGeneration != 3 || len(back.Status.Conditions) != 1 {
		t.Errorf("round trip = %+v, want %+v", back, src)
	}
}
`

const readmeTemplate = `| where | what |
| --- | --- |
| ` + "`cmd/sidecar/main.go`" + ` | the sidecar: flags (` + "`--address`" + `), the scheme, the controllers and webhooks registered on the Go SDK's ` + "`sidecar.Server`" + ` |
| ` + "`api/<version>/`" + ` | the kinds' types, with kubebuilder's markers; ` + "`zz_generated.deepcopy.go`" + ` is generated |
| ` + "`internal/controller/`" + ` | one reconciler per kind, and its test on ` + "`sidecartest`" + ` |
| ` + "`internal/webhook/<version>/`" + ` | the defaulting and validation handlers, and their tests |

After changing the types, run ` + "`make manifests`" + ` (` + "`polyop generate`" + `): controller-gen regenerates the deep
copy functions and the CRDs in ` + "`config/crd/bases`" + ` from the markers, as in a kubebuilder project (the markers:
https://book.kubebuilder.io/reference/markers). ` + "`polyop generate`" + ` uses ` + "`$CONTROLLER_GEN`" + `, else
` + "`bin/controller-gen`" + `, else controller-gen on your PATH, and installs it into ` + "`bin/`" + ` when none is found.

The sidecar uses the Go SDK (` + "`github.com/polyop/polyop/sdk/go`" + `): its README explains the builders, the
reconciler's result and errors, desired children, conditions and the test harness.
`
