package conversion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/polyop/polyop/internal/admission"
	"github.com/polyop/polyop/internal/description"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/tracing"
)

// Path is where the host serves conversions, for every converted kind.
const Path = "/convert"

// DefaultTimeout is the longest the host waits for the sidecar's answer to a
// conversion unless configured otherwise (the host's --conversion-timeout).
// The API server waits 30 seconds for a conversion webhook.
const DefaultTimeout = 10 * time.Second

// apiServerTimeout is how long the API server waits for a conversion webhook
// when its request does not say.
const apiServerTimeout = 30 * time.Second

// DefaultMaxRequestBytes is the largest ConversionReview the handler reads
// unless configured otherwise (the host's --conversion-max-request-bytes).
//
// The API server sends a ConversionReview for every object it reads or writes
// at a version other than the one stored, and one for every page of a list it
// serves at another version, with every object of the page in one review
// (apiextensions-apiserver's webhook converter). One object is at most 3 MiB
// (the API server's limit on a request body, 2 × etcd's default of 1.5 MiB
// per stored value), and at most 1.5 MiB once stored; a list page has no
// limit of its own: client-go's pager asks for 500 objects a page, and a list
// served from the API server's watch cache may hold every object of the kind.
// 16 MiB holds a page of 500 objects of 32 KiB, or 10 objects at etcd's
// limit, and any single object with room to spare; a conversion in flight
// holds about three times its body, so three of them stay within the host
// container's 256 MiB. A list past it fails with a 413 naming the flag that
// raises it.
const DefaultMaxRequestBytes = 16 << 20

// Sidecar is the part of the host's sidecar client the handler calls;
// *sidecar.Client implements it.
type Sidecar interface {
	Convert(ctx context.Context, req *polyopv1alpha1.ConvertRequest) (*polyopv1alpha1.ConvertResponse, error)
}

// Options configure the handler.
type Options struct {
	// SidecarName names the sidecar in failures. Required.
	SidecarName string
	// SidecarAddress is the sidecar's address, quoted when it cannot be
	// reached. Defaults to "".
	SidecarAddress string
	// Timeout caps the deadline of every call to the sidecar; the deadline is
	// also kept below the API server's timeout. Defaults to DefaultTimeout.
	Timeout time.Duration
	// MaxRequestBytes is the largest ConversionReview the handler reads; a
	// larger one is answered 413. Defaults to DefaultMaxRequestBytes.
	MaxRequestBytes int64
}

// NewHandler returns the ConversionReview handler for the kinds the sidecar
// converts.
func NewHandler(sc Sidecar, conversions []description.Conversion, opts Options) http.Handler {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	versions := map[schema.GroupKind][]string{}
	for _, c := range conversions {
		versions[c.GroupKind] = c.Versions
	}
	buffers := &sync.Pool{New: func() any {
		buf := make([]byte, 0, opts.MaxRequestBytes)
		return &buf
	}}
	return &handler{sc: sc, versions: versions, opts: opts, buffers: buffers}
}

type handler struct {
	sc       Sidecar
	versions map[schema.GroupKind][]string
	opts     Options
	buffers  *sync.Pool // of *[]byte of capacity opts.MaxRequestBytes, for bodies of undeclared length
}

var reviewGVK = apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := admission.WithAPIServerTimeout(r.Context(), r)
	log := logf.FromContext(ctx).WithName("conversion")
	body, done, err := h.readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			msg := fmt.Sprintf("the ConversionReview is over the limit of %d bytes: raise the host's --conversion-max-request-bytes", tooLarge.Limit)
			log.Info("Refused a conversion request", "reason", msg)
			http.Error(w, msg, http.StatusRequestEntityTooLarge)
			return
		}
		log.Info("Could not read a conversion request", "reason", err.Error())
		http.Error(w, "reading the ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	review := &apiextensionsv1.ConversionReview{}
	err = json.Unmarshal(body, review) // copies the objects out of body
	done()
	if err != nil {
		log.Info("Refused a conversion request that is not a ConversionReview", "reason", err.Error())
		http.Error(w, "the body is not a ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		log.Info("Refused a ConversionReview without a request")
		http.Error(w, "the ConversionReview has no request: the API server sends its objects to convert in request", http.StatusBadRequest)
		return
	}
	req := review.Request
	log = log.WithValues("uid", req.UID, "desiredAPIVersion", req.DesiredAPIVersion, "objects", len(req.Objects))
	ctx, span := otel.GetTracerProvider().Tracer(tracerName).Start(ctx, "conversion", trace.WithAttributes(
		attribute.String("polyop.desired_api_version", req.DesiredAPIVersion),
		attribute.Int("polyop.objects", len(req.Objects)),
	))
	resp := h.convert(logf.IntoContext(ctx, log), req)
	endSpan(span, resp)
	resp.UID = req.UID
	w.Header().Set("Content-Type", "application/json")
	if err := writeReview(w, resp); err != nil {
		log.Error(err, "Writing a conversion response")
	}
}

// writeReview writes the ConversionReview answering with resp. It writes the
// converted objects, which check found valid JSON, one by one, rather than
// copying them all into one buffer first as json.Marshal would: a review of S
// bytes costs S to answer, not 2 or 3 S.
func writeReview(w io.Writer, resp *apiextensionsv1.ConversionResponse) error {
	uid, err := json.Marshal(resp.UID)
	if err != nil {
		return err
	}
	result, err := json.Marshal(resp.Result)
	if err != nil {
		return err
	}
	parts := [][]byte{[]byte(`{"kind":"` + reviewGVK.Kind + `","apiVersion":"` + reviewGVK.GroupVersion().String() + `","response":{"uid":`), uid, []byte(`,"convertedObjects":[`)}
	for i, o := range resp.ConvertedObjects {
		if i > 0 {
			parts = append(parts, []byte(","))
		}
		parts = append(parts, o.Raw)
	}
	parts = append(parts, []byte(`],"result":`), result, []byte("}}\n"))
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// readBody reads r's body, of at most h.opts.MaxRequestBytes, into one
// buffer the size of the declared length, so that reading costs the body's
// size and no more. A body of undeclared length (chunked; the API server
// always declares it) is read into a buffer of the limit from a pool, so that
// such bodies, one after the other, reuse the same memory rather than leave
// a limit's worth of garbage each; done returns it to the pool. A body over
// the limit is an *http.MaxBytesError.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, done func(), err error) {
	max := h.opts.MaxRequestBytes
	if r.ContentLength > max {
		return nil, nil, &http.MaxBytesError{Limit: max}
	}
	reader := http.MaxBytesReader(w, r.Body, max)
	if r.ContentLength >= 0 {
		body = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(reader, body); err != nil {
			return nil, nil, err
		}
		return body, func() {}, nil
	}
	buf := h.buffers.Get().(*[]byte)
	done = func() { h.buffers.Put(buf) }
	body = (*buf)[:0]
	for len(body) < cap(body) {
		n, err := reader.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, done, nil
		}
		if err != nil {
			done()
			return nil, nil, err
		}
	}
	// Full: one byte more is over the limit, which reader reports.
	if _, err := reader.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		done()
		return nil, nil, err
	}
	return body, done, nil
}

// convert converts the request's objects through the sidecar, or says why it
// cannot.
func (h *handler) convert(ctx context.Context, req *apiextensionsv1.ConversionRequest) (resp *apiextensionsv1.ConversionResponse) {
	log := logf.FromContext(ctx)
	defer func() {
		if r := recover(); r != nil {
			log.Error(fmt.Errorf("%v", r), "Observed a panic converting objects", "stack", string(debug.Stack()))
			resp = failure(fmt.Sprintf("the host failed converting the objects: panic: %v", r))
		}
	}()
	desired, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return failure(fmt.Sprintf("desired apiVersion %q: %v", req.DesiredAPIVersion, err))
	}
	ids := make([]identity, len(req.Objects))
	objects := make([][]byte, len(req.Objects))
	var kind string
	for i, o := range req.Objects {
		if err := json.Unmarshal(o.Raw, &ids[i]); err != nil {
			return failure(fmt.Sprintf("object %d of the request is not a JSON object: %v", i, err))
		}
		gv, err := schema.ParseGroupVersion(ids[i].APIVersion)
		if err != nil {
			return failure(fmt.Sprintf("object %d of the request: apiVersion %q: %v", i, ids[i].APIVersion, err))
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: ids[i].Kind}
		versions, ok := h.versions[gk]
		switch {
		case !ok:
			return failure(fmt.Sprintf("sidecar %q does not convert %s: it declares no conversion for it", h.opts.SidecarName, gk))
		case gv.Group != desired.Group:
			return failure(fmt.Sprintf("cannot convert %s to another group, %s", gk, req.DesiredAPIVersion))
		case !slices.Contains(versions, gv.Version) || !slices.Contains(versions, desired.Version):
			return failure(fmt.Sprintf("sidecar %q converts %s between versions %v only, not from %s to %s",
				h.opts.SidecarName, gk, versions, gv.Version, desired.Version))
		}
		kind = ids[i].Kind
		objects[i] = o.Raw
	}
	if len(objects) == 0 {
		return success(nil)
	}
	trace.SpanFromContext(ctx).SetAttributes(tracing.Kind.String(kind))

	timeout := admission.APIServerTimeout(ctx, apiServerTimeout)
	callCtx, cancel := context.WithTimeout(ctx, admission.Deadline(timeout, h.opts.Timeout))
	defer cancel()
	start := time.Now()
	out, err := h.sc.Convert(callCtx, &polyopv1alpha1.ConvertRequest{
		Uid:               string(req.UID),
		DesiredApiVersion: req.DesiredAPIVersion,
		Objects:           objects,
	})
	what := fmt.Sprintf("sidecar %q could not convert %d %s object(s) to %s", h.opts.SidecarName, len(objects), kind, req.DesiredAPIVersion)
	if err != nil {
		msg := what + ": " + h.callError(err, time.Since(start))
		log.Info("Conversion failed", "reason", msg)
		return failure(msg)
	}
	if e := out.GetError(); e != "" {
		return failure(what + ": " + e)
	}
	if err := check(ids, out.GetObjects(), req.DesiredAPIVersion); err != nil {
		msg := what + ": it answered " + err.Error()
		log.Info("Conversion failed", "reason", msg)
		return failure(msg)
	}
	converted := make([]runtime.RawExtension, len(out.GetObjects()))
	for i, o := range out.GetObjects() {
		converted[i] = runtime.RawExtension{Raw: o}
	}
	return success(converted)
}

func (h *handler) callError(err error, took time.Duration) string {
	st := status.Convert(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Sprintf("it did not answer within %s", took.Round(time.Millisecond))
	case codes.Unavailable:
		where := ""
		if h.opts.SidecarAddress != "" {
			where = " at " + h.opts.SidecarAddress
		}
		return fmt.Sprintf("it is unreachable%s: %s", where, st.Message())
	case codes.Unimplemented:
		return "it does not implement Convert: " + st.Message()
	default:
		return fmt.Sprintf("it failed (%s): %s", st.Code(), st.Message())
	}
}

// check checks the sidecar's converted objects against the ones sent.
func check(sent []identity, converted [][]byte, desiredAPIVersion string) error {
	if len(converted) != len(sent) {
		return fmt.Errorf("with %d object(s) for the %d sent", len(converted), len(sent))
	}
	for i, raw := range converted {
		if !json.Valid(raw) {
			return fmt.Errorf("object %d is not valid JSON", i)
		}
		var got identity
		if err := json.Unmarshal(raw, &got); err != nil {
			return fmt.Errorf("object %d is not a JSON object: %w", i, err)
		}
		want := sent[i]
		switch {
		case got.APIVersion != desiredAPIVersion:
			return fmt.Errorf("object %d (%s) has apiVersion %q, not %q", i, want.ref(), got.APIVersion, desiredAPIVersion)
		case got.Kind != want.Kind:
			return fmt.Errorf("object %d (%s) has kind %q, not %q", i, want.ref(), got.Kind, want.Kind)
		case got.Metadata.Namespace != want.Metadata.Namespace || got.Metadata.Name != want.Metadata.Name || got.Metadata.UID != want.Metadata.UID:
			return fmt.Errorf("object %d as %s, another object than the %s sent", i, got.ref(), want.ref())
		}
	}
	return nil
}

// identity is what makes an object the same object.
type identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
	} `json:"metadata"`
}

func (id identity) ref() string {
	if id.Metadata.Namespace != "" {
		return id.Metadata.Namespace + "/" + id.Metadata.Name
	}
	return id.Metadata.Name
}

func success(objects []runtime.RawExtension) *apiextensionsv1.ConversionResponse {
	if objects == nil {
		objects = []runtime.RawExtension{}
	}
	return &apiextensionsv1.ConversionResponse{
		ConvertedObjects: objects,
		Result:           metav1.Status{Status: metav1.StatusSuccess},
	}
}

func failure(msg string) *apiextensionsv1.ConversionResponse {
	return &apiextensionsv1.ConversionResponse{
		ConvertedObjects: []runtime.RawExtension{},
		Result:           metav1.Status{Status: metav1.StatusFailure, Message: msg},
	}
}

// tracerName names the tracer of the host's conversion spans; the global
// tracer provider, which the host sets from the OTEL_* environment
// variables, makes them.
const tracerName = "github.com/polyop/polyop/internal/conversion"

// endSpan records the conversion's result on its span, and ends it: status
// Error with the message for a failed conversion.
func endSpan(span trace.Span, resp *apiextensionsv1.ConversionResponse) {
	if resp.Result.Status == metav1.StatusFailure {
		span.SetAttributes(tracing.Result.String(tracing.ResultError))
		span.SetStatus(otelcodes.Error, resp.Result.Message)
	} else {
		span.SetAttributes(tracing.Result.String(tracing.ResultSuccess))
	}
	span.End()
}
