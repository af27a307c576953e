package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/polyop/polyop/examples/go/maintenancewindow/api/v1"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// The annotations that drive an admission call (with --webhooks).
const (
	// annotationDeny makes the validator refuse with this message.
	annotationDeny = "e2e.polyop.dev/deny"
	// annotationConflict makes the validator refuse with a 409 Conflict
	// (apierrors.NewConflict) carrying this message.
	annotationConflict = "e2e.polyop.dev/conflict"
	// annotationInvalid makes the validator refuse with a field error on the
	// field this names (for example "spec.every"), quoting its value.
	annotationInvalid = "e2e.polyop.dev/invalid"
	// annotationWarn makes the validator warn with this message.
	annotationWarn = "e2e.polyop.dev/warn"
	// annotationAdmissionDelay makes Default and Validate sleep this long
	// first.
	annotationAdmissionDelay = "e2e.polyop.dev/admission-delay"
	// annotationDefaultAnswer garbles the answer to Default: "not-json",
	// "rename", "rekind" or "renamespace" (see garbleDefault).
	annotationDefaultAnswer = "e2e.polyop.dev/default-answer"
	// labelDefaulted is the label the defaulter sets.
	labelDefaulted = "e2e.polyop.dev/defaulted"
)

// webhookConfig is how the admission webhooks are declared.
type webhookConfig struct {
	enabled        bool
	failurePolicy  string
	timeoutSeconds int
	logFile        string
}

var failurePolicies = map[string]sidecar.FailurePolicy{"": sidecar.Fail, "fail": sidecar.Fail, "ignore": sidecar.Ignore}

// registerWebhooks registers the defaulter and the validator of
// MaintenanceWindow on srv, logging every call to log.
func registerWebhooks(srv *sidecar.Server, cfg webhookConfig, log *admissionLog) error {
	policy, ok := failurePolicies[cfg.failurePolicy]
	if !ok {
		return fmt.Errorf("--webhook-failure-policy %q: want fail or ignore", cfg.failurePolicy)
	}
	w := &webhooks{log: log}
	return sidecar.NewWebhookManagedBy[*v1.MaintenanceWindow](srv).
		WithDefaulter(w).
		WithValidator(w).
		WithOperations(sidecar.Create, sidecar.Update, sidecar.Delete).
		WithFailurePolicy(policy).
		WithTimeoutSeconds(int32(cfg.timeoutSeconds)).
		Complete()
}

// webhooks default and validate as each object's annotations say.
type webhooks struct {
	log *admissionLog
}

func (w *webhooks) Default(ctx context.Context, mw *v1.MaintenanceWindow) error {
	if err := w.record(ctx, "default", mw); err != nil {
		return err
	}
	if mw.Labels == nil {
		mw.Labels = map[string]string{}
	}
	mw.Labels[labelDefaulted] = "true"
	return nil
}

func (w *webhooks) ValidateCreate(ctx context.Context, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	return w.validate(ctx, mw)
}

func (w *webhooks) ValidateUpdate(ctx context.Context, _, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	return w.validate(ctx, mw)
}

func (w *webhooks) ValidateDelete(ctx context.Context, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	return w.validate(ctx, mw)
}

func (w *webhooks) validate(ctx context.Context, mw *v1.MaintenanceWindow) (sidecar.Warnings, error) {
	if err := w.record(ctx, "validate", mw); err != nil {
		return nil, err
	}
	var warnings sidecar.Warnings
	if msg, ok := mw.Annotations[annotationWarn]; ok {
		warnings = append(warnings, msg)
	}
	if msg, ok := mw.Annotations[annotationDeny]; ok {
		return warnings, errors.New(msg)
	}
	if msg, ok := mw.Annotations[annotationConflict]; ok {
		gr := schema.GroupResource{Group: v1.GroupVersion.Group, Resource: "maintenancewindows"}
		return warnings, apierrors.NewConflict(gr, mw.Name, errors.New(msg))
	}
	if path, ok := mw.Annotations[annotationInvalid]; ok {
		value := map[string]string{"spec.start": mw.Spec.Start, "spec.duration": mw.Spec.Duration, "spec.every": mw.Spec.Every}[path]
		errs := field.ErrorList{field.Invalid(field.NewPath(path), value, "rejected by testsidecar")}
		return warnings, apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: "MaintenanceWindow"}, mw.Name, errs)
	}
	return warnings, nil
}

// record logs the call and sleeps as the object asks.
func (w *webhooks) record(ctx context.Context, webhook string, mw *v1.MaintenanceWindow) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	if err := w.log.record(admissionCall{
		Webhook:   webhook,
		Operation: string(req.Operation),
		Namespace: mw.Namespace,
		Name:      mw.Name,
		DryRun:    req.DryRun != nil && *req.DryRun,
		User:      req.UserInfo.Username,
	}); err != nil {
		return err
	}
	if value, ok := mw.Annotations[annotationAdmissionDelay]; ok {
		d, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Errorf("annotation %s: %q is not a duration", annotationAdmissionDelay, value)
		}
		return sleep(ctx, d)
	}
	return nil
}

// garbleDefault replaces the defaulted object of a Default answer as the
// object's annotationDefaultAnswer says, so tests can see the host refuse it:
// "not-json" is not JSON, "rename", "rekind" and "renamespace" change the
// name, the kind and the namespace.
func garbleDefault(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	in, ok := req.(*polyopv1alpha1.DefaultRequest)
	out, isDefault := resp.(*polyopv1alpha1.DefaultResponse)
	if err != nil || !ok || !isDefault {
		return resp, err
	}
	var obj map[string]any
	if json.Unmarshal(in.GetRequest().GetObject(), &obj) != nil {
		return resp, nil
	}
	metadata, _ := obj["metadata"].(map[string]any)
	annotations, _ := metadata["annotations"].(map[string]any)
	switch annotations[annotationDefaultAnswer] {
	case "not-json":
		out.Object = []byte(`{"apiVersion": "examples.polyop.dev/v1", "kind": `)
		return out, nil
	case "rename":
		metadata["name"] = fmt.Sprint(metadata["name"], "-renamed")
	case "rekind":
		obj["kind"] = "SomethingElse"
	case "renamespace":
		metadata["namespace"] = "elsewhere"
	default:
		return resp, nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out.Object = data
	return out, nil
}

// admissionCall is one line of the admission log.
type admissionCall struct {
	Time      string `json:"time"`
	Webhook   string `json:"webhook"`
	Operation string `json:"operation"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	DryRun    bool   `json:"dryRun"`
	User      string `json:"user"`
}

// admissionLog appends one JSON line per admission call to a file. A nil
// *admissionLog records nothing.
type admissionLog struct {
	mu   sync.Mutex
	file *os.File
}

func openAdmissionLog(path string) (*admissionLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the admission log: %w", err)
	}
	return &admissionLog{file: f}, nil
}

func (l *admissionLog) record(c admissionCall) error {
	if l == nil {
		return nil
	}
	c.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.file.Write(append(line, '\n'))
	return err
}

func (l *admissionLog) Close() error {
	if l == nil {
		return nil
	}
	return l.file.Close()
}
