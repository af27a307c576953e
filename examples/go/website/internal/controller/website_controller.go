package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/polyop/polyop/examples/go/website/api/v1"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

// ControllerName is the name of the Website controller.
const ControllerName = "website"

// ContentHashAnnotation, on the pod template, is the hash of the content the
// pods serve: a new hash rolls them.
const ContentHashAnnotation = "examples.polyop.dev/content-hash"

// Defaults of the spec's optional fields, as the CRD sets them.
const (
	DefaultImage    = "nginx:1.27-alpine"
	DefaultReplicas = int32(1)
)

// Reasons of the Ready condition and of events.
const (
	ReasonAvailable      = "Available"
	ReasonProgressing    = "Progressing"
	ReasonContentMissing = "ContentMissing"
	ReasonInvalidSpec    = "InvalidSpec"
)

// WebsiteReconciler serves a Website declaratively: it reads the content
// ConfigMap and declares the Website's children, a ConfigMap with the
// published content, a Deployment of nginx pods serving it and, when the site
// is exposed, a Service. The host applies them with server-side apply, makes
// the Website their owner and deletes the children no longer declared.
type WebsiteReconciler struct {
	// Client reads the content ConfigMaps. SetupWithServer sets it to the
	// Server's client when it is nil.
	Client client.Client
}

// SetupWithServer registers the controller on srv. The host watches the
// Website's children and, through the field spec.configMapName, the content
// ConfigMaps: a change to the content reconciles the Websites that serve it.
func (r *WebsiteReconciler) SetupWithServer(srv *sidecar.Server) error {
	if r.Client == nil {
		r.Client = srv.GetClient()
	}
	return sidecar.NewControllerManagedBy[*v1.Website](srv).
		Named(ControllerName).
		WithUpdateFilters(sidecar.GenerationChanged).
		Owns(&appsv1.Deployment{}, sidecar.SendObserved()).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Watches(&corev1.ConfigMap{}, sidecar.MapByField("spec.configMapName")).
		Complete(r)
}

// Reconcile declares the Website's children for its current content and
// reports, from the observed Deployment, whether the site is served.
func (r *WebsiteReconciler) Reconcile(ctx context.Context, site *v1.Website) (sidecar.Result, error) {
	log := logf.FromContext(ctx)
	st := &site.Status
	st.ObservedGeneration = site.Generation

	if site.Spec.ConfigMapName == publishedName(site) {
		message := fmt.Sprintf("spec.configMapName %q is the name of the ConfigMap the Website publishes its content in; name another ConfigMap", site.Spec.ConfigMapName)
		conditions.MarkFalse(&st.Conditions, conditions.Ready, ReasonInvalidSpec, message, site.Generation)
		sidecar.Recorder(ctx).Event(corev1.EventTypeWarning, ReasonInvalidSpec, message)
		return sidecar.Result{}, sidecar.TerminalError(fmt.Errorf("invalid spec: %s", message))
	}

	var content corev1.ConfigMap
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: site.Spec.ConfigMapName}, &content)
	if apierrors.IsNotFound(err) {
		// Nothing to publish yet. The host watches ConfigMaps by this field, so
		// the Website reconciles again when the ConfigMap appears; the children
		// already there stay.
		message := fmt.Sprintf("ConfigMap %s not found", site.Spec.ConfigMapName)
		if !conditions.IsFalse(st.Conditions, conditions.Ready) || conditions.Get(st.Conditions, conditions.Ready).Reason != ReasonContentMissing {
			sidecar.Recorder(ctx).Event(corev1.EventTypeWarning, ReasonContentMissing, message)
		}
		conditions.MarkFalse(&st.Conditions, conditions.Ready, ReasonContentMissing, message, site.Generation)
		return sidecar.Result{}, nil
	}
	if err != nil {
		return sidecar.Result{}, fmt.Errorf("reading ConfigMap %s: %w", site.Spec.ConfigMapName, err)
	}

	hash := contentHash(&content)
	children := []client.Object{publishedContent(site, &content, hash), deployment(site, hash)}
	st.URL = ""
	if exposed(site) {
		children = append(children, service(site))
		st.URL = fmt.Sprintf("http://%s.%s.svc", site.Name, site.Namespace)
	}
	if err := sidecar.Desire(ctx, children...); err != nil {
		return sidecar.Result{}, err
	}
	// These are all the children: the host deletes the Service once the site
	// is no longer exposed.
	sidecar.DesiredComplete(ctx)
	if st.ContentHash != hash {
		sidecar.Recorder(ctx).Eventf(corev1.EventTypeNormal, "Published", "Publishing content %s of ConfigMap %s", hash, content.Name)
	}
	st.ContentHash = hash

	deployments, err := sidecar.ObservedChildren[*appsv1.Deployment](ctx)
	if err != nil {
		return sidecar.Result{}, err
	}
	st.AvailableReplicas = 0
	current := false
	for _, d := range deployments {
		if d.Name == site.Name {
			st.AvailableReplicas = d.Status.AvailableReplicas
			current = d.Spec.Template.Annotations[ContentHashAnnotation] == hash && d.Status.ObservedGeneration == d.Generation
		}
	}
	want := replicas(site)
	switch {
	case current && st.AvailableReplicas >= want:
		conditions.MarkTrue(&st.Conditions, conditions.Ready, ReasonAvailable,
			fmt.Sprintf("%d of %d pods serve content %s", st.AvailableReplicas, want, hash), site.Generation)
	default:
		conditions.MarkFalse(&st.Conditions, conditions.Ready, ReasonProgressing,
			fmt.Sprintf("%d of %d pods available; rolling out content %s", st.AvailableReplicas, want, hash), site.Generation)
	}
	log.V(1).Info("Declared the children", "contentHash", hash, "exposed", exposed(site), "availableReplicas", st.AvailableReplicas)
	return sidecar.Result{}, nil
}

// publishedName is the name of the ConfigMap holding the published content.
func publishedName(site *v1.Website) string { return site.Name + "-published" }

func labels(site *v1.Website) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "website",
		"app.kubernetes.io/instance":   site.Name,
		"app.kubernetes.io/managed-by": "polyop-website",
	}
}

func replicas(site *v1.Website) int32 {
	if site.Spec.Replicas == nil {
		return DefaultReplicas
	}
	return *site.Spec.Replicas
}

func exposed(site *v1.Website) bool {
	return site.Spec.Expose == nil || *site.Spec.Expose
}

// contentHash identifies the content of a ConfigMap: the first 16 hex digits
// of a SHA-256 over its keys and values, in order.
func contentHash(cm *corev1.ConfigMap) string {
	h := sha256.New()
	write := func(kind, key string, value []byte) {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", kind, key, len(value))
		h.Write(value)
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write("data", k, []byte(cm.Data[k]))
	}
	keys = keys[:0]
	for k := range cm.BinaryData {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write("binaryData", k, cm.BinaryData[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// publishedContent is the ConfigMap the pods mount: a copy of the content.
func publishedContent(site *v1.Website, content *corev1.ConfigMap, hash string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        publishedName(site),
			Labels:      labels(site),
			Annotations: map[string]string{ContentHashAnnotation: hash},
		},
		Data:       content.Data,
		BinaryData: content.BinaryData,
	}
}

func deployment(site *v1.Website, hash string) *appsv1.Deployment {
	image := site.Spec.Image
	if image == "" {
		image = DefaultImage
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: site.Name, Labels: labels(site)},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas(site)),
			Selector: &metav1.LabelSelector{MatchLabels: labels(site)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels(site),
					Annotations: map[string]string{ContentHashAnnotation: hash},
				},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "nginx",
						Image: image,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")},
						}},
						VolumeMounts: []corev1.VolumeMount{{Name: "content", MountPath: "/usr/share/nginx/html", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{
						Name: "content",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: publishedName(site)},
						}},
					}},
				},
			},
		},
	}
}

func service(site *v1.Website) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: site.Name, Labels: labels(site)},
		Spec: corev1.ServiceSpec{
			Selector: labels(site),
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
}
