package description

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GuessingMapper is a RESTMapper for resolving desc without an API server,
// as `host webhooks` and `host rbac` do when no kubeconfig is given: it knows
// every kind desc names, each with the resource a webhook of the kind declares
// or else the one guessed from the kind (lower case, plural, as a CRD's plural
// usually is: meta.UnsafeGuessKindToResource), namespaced unless it is one of
// the built-in cluster-scoped kinds. That is right for nearly every kind but
// not all: a mapper backed by API discovery is.
func GuessingMapper(desc *Description) meta.RESTMapper {
	var versions []schema.GroupVersion
	for _, c := range desc.Conversions {
		for _, v := range c.Versions {
			versions = append(versions, c.GroupKind.WithVersion(v).GroupVersion())
		}
	}
	m := meta.NewDefaultRESTMapper(versions)
	add := func(gvk schema.GroupVersionKind) {
		if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return
		}
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		for _, wh := range desc.Webhooks {
			if wh.GVK == gvk && wh.Resource != "" {
				plural.Resource = wh.Resource
			}
		}
		scope := meta.RESTScopeNamespace
		if clusterScoped[gvk.GroupKind()] {
			scope = meta.RESTScopeRoot
		}
		m.AddSpecific(gvk, plural, singular, scope)
	}
	for _, gvk := range desc.WatchedKinds() {
		add(gvk)
	}
	for _, wh := range desc.Webhooks {
		add(wh.GVK)
	}
	for _, ix := range desc.Indexes {
		add(ix.GVK)
	}
	for _, ck := range desc.CachedKinds {
		add(ck.GVK)
	}
	for _, c := range desc.Conversions {
		for _, v := range c.Versions {
			add(c.GroupKind.WithVersion(v))
		}
	}
	return m
}

// clusterScoped are the built-in kinds whose objects live in no namespace, for
// guessing a kind's scope without discovery.
var clusterScoped = map[schema.GroupKind]bool{}

func init() {
	for group, kinds := range map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"storage.k8s.io":               {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "VolumeAttributesClass"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"apiregistration.k8s.io":       {"APIService"},
		"admissionregistration.k8s.io": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"networking.k8s.io":            {"IngressClass", "IPAddress", "ServiceCIDR"},
		"node.k8s.io":                  {"RuntimeClass"},
		"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"resource.k8s.io":              {"DeviceClass"},
	} {
		for _, kind := range kinds {
			clusterScoped[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
}

// ClusterScoped guesses whether objects of gk live in no namespace, without
// discovery: true for the built-in kinds that do.
func ClusterScoped(gk schema.GroupKind) bool { return clusterScoped[gk] }
