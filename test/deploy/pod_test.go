package deploy

import (
	"bufio"
	"bytes"
	"net"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPodShape checks, for every overlay, what the API server's schemas do
// not: that the pod runs the host and the sidecar with a socket volume both
// mount where the flags point, probes that reach what they check, a locked
// down security context, and bounded resources.
func TestPodShape(t *testing.T) {
	t.Parallel()
	hostFlags := knownFlags(t, hostBin)
	for _, o := range overlays(t) {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			ex := exampleOf(t, o)
			objs := render(t, o.dir)
			dep := deployment(t, objs)
			pod := &dep.Spec.Template.Spec

			if len(pod.Containers) != 2 || len(pod.InitContainers) != 1 {
				t.Fatalf("the pod has containers %v and init containers %v, want host and sidecar, and install-probe",
					names(pod.Containers), names(pod.InitContainers))
			}
			host := container(t, pod, "host")
			sidecar := container(t, pod, "sidecar")
			install := container(t, pod, "install-probe")

			t.Run("security context", func(t *testing.T) { checkSecurity(t, pod) })
			t.Run("resources", func(t *testing.T) {
				for _, c := range []*corev1.Container{host, sidecar, install} {
					checkResources(t, c)
				}
			})
			t.Run("host flags", func(t *testing.T) {
				mustf(t, slices0(host.Command) == "/host" && len(host.Command) == 1, "host command %q, want [/host] (the host image's ENTRYPOINT)", host.Command)
				for _, a := range expandEnv(host, host.Args) {
					name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
					isBool, known := hostFlags[name]
					switch {
					case !strings.HasPrefix(a, "--"):
						t.Errorf("host argument %q: want --flag=value, so that it is read unambiguously", a)
					case !known:
						t.Errorf("host argument %q: the host has no flag --%s", a, name)
					case !isBool && !hasValue:
						t.Errorf("host argument %q: want --%s=value", a, name)
					}
				}
			})
			t.Run("sockets", func(t *testing.T) { checkSockets(t, ex, pod, host, sidecar) })
			t.Run("credentials", func(t *testing.T) { checkCredentials(t, pod, host) })
			t.Run("host probes", func(t *testing.T) { checkHostProbes(t, host) })
			t.Run("sidecar probes", func(t *testing.T) { checkSidecarProbes(t, ex, pod, host, sidecar, install) })
			t.Run("metrics", func(t *testing.T) { checkMetrics(t, objs, host) })
			t.Run("webhooks", func(t *testing.T) { checkWebhooks(t, objs, pod, host) })
		})
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func slices0(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

var (
	flagsMu sync.Mutex
	flags   = map[string]map[string]bool{}
)

// knownFlags lists the flags a binary prints with --help, each with whether
// it is a boolean (Go's flag package prints no type for those).
func knownFlags(t *testing.T, bin string) map[string]bool {
	t.Helper()
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f, ok := flags[bin]; ok {
		return f
	}
	out, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 2 depending on the program
	f := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, "  -"))
		f[fields[0]] = len(fields) == 1
	}
	if len(f) < 5 {
		t.Fatalf("%s --help lists no flags:\n%s", bin, out)
	}
	flags[bin] = f
	return f
}

// checkSecurity: non-root, seccomp, no privilege escalation, read-only root
// file system, every capability dropped, in every container.
func checkSecurity(t *testing.T, pod *corev1.PodSpec) {
	sc := pod.SecurityContext
	if sc == nil {
		t.Fatal("the pod has no security context")
	}
	mustf(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "pod: runAsNonRoot is not true")
	mustf(t, sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "pod: seccompProfile is not RuntimeDefault")
	mustf(t, sc.RunAsUser != nil && *sc.RunAsUser == imageUser && sc.RunAsGroup != nil && *sc.RunAsGroup == imageUser,
		"pod: runAsUser and runAsGroup are not %d, the images' user (both containers must be one user to connect to each other's sockets)", imageUser)
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		csc := c.SecurityContext
		if csc == nil {
			t.Errorf("%s: no security context", c.Name)
			continue
		}
		mustf(t, csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation is not false", c.Name)
		mustf(t, csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem is not true", c.Name)
		mustf(t, csc.Privileged == nil || !*csc.Privileged, "%s: privileged", c.Name)
		mustf(t, csc.Capabilities != nil && len(csc.Capabilities.Drop) == 1 && csc.Capabilities.Drop[0] == "ALL" && len(csc.Capabilities.Add) == 0,
			"%s: capabilities %v, want every one dropped and none added", c.Name, csc.Capabilities)
		mustf(t, csc.RunAsUser == nil || *csc.RunAsUser != 0, "%s: runs as root", c.Name)
	}
}

// imageUser is the user the images run as (USER in the Dockerfiles).
const imageUser = 65532

// checkResources: requests and limits of CPU and memory, requests within
// limits.
func checkResources(t *testing.T, c *corev1.Container) {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[r]
		limit, hasLimit := c.Resources.Limits[r]
		if !hasReq || !hasLimit {
			t.Errorf("%s: no %s request or limit", c.Name, r)
			continue
		}
		mustf(t, req.Cmp(limit) <= 0, "%s: %s request %s above its limit %s", c.Name, r, req.String(), limit.String())
	}
	if limit, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "sidecar" {
		// The probe runs inside the sidecar's container, counted against its
		// limit: leave room for it.
		mustf(t, limit.Cmp(resource.MustParse("64Mi")) >= 0, "sidecar: memory limit %s leaves no room for the probe", limit.String())
	}
	if c.Name == "sidecar" {
		// A Go sidecar's GOMAXPROCS follows its own CPU limit, rounded up.
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMAXPROCS" })
		var ref *corev1.ResourceFieldSelector
		if i >= 0 && c.Env[i].ValueFrom != nil {
			ref = c.Env[i].ValueFrom.ResourceFieldRef
		}
		mustf(t, ref != nil && ref.Resource == "limits.cpu" && (ref.ContainerName == "" || ref.ContainerName == c.Name) &&
			ref.Divisor.Cmp(resource.MustParse("1")) == 0,
			"sidecar: GOMAXPROCS is not its own limits.cpu with divisor 1 (env %v)", c.Env)
	}
}

// socketDir returns the folder of a unix socket address, "" for another
// address.
func socketDir(address string) string {
	if p, ok := strings.CutPrefix(address, "unix://"); ok {
		return path.Dir(p)
	}
	return ""
}

// mountOf returns the mount of c whose path holds dir, the deepest.
func mountOf(c *corev1.Container, dir string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if (dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/")) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	return best
}

func volume(pod *corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// checkSockets: the sidecar serves where the host dials, the host serves the
// cluster service where the sidecar's client dials, and both sockets are in
// an emptyDir both containers mount at the same path.
func checkSockets(t *testing.T, ex example, pod *corev1.PodSpec, host, sidecar *corev1.Container) {
	hostSidecar, ok := flagValue(host.Args, "sidecar-address")
	if !ok {
		hostSidecar = defaultSidecarAddress
	}
	served := sidecarAddress(ex, sidecar)
	mustf(t, served == hostSidecar, "the sidecar serves on %s (--%s) but the host dials %s (--sidecar-address)", served, ex.addressFlag, hostSidecar)

	cluster, ok := flagValue(host.Args, "cluster-address")
	if !ok {
		cluster = defaultClusterAddress
	}
	clientCluster, ok := envValue(sidecar, "POLYOP_CLUSTER_ADDRESS")
	mustf(t, ok && clientCluster == cluster, "the sidecar's POLYOP_CLUSTER_ADDRESS is %q, the host serves the cluster service on %s (--cluster-address)", clientCluster, cluster)

	for what, address := range map[string]string{"sidecar socket": hostSidecar, "cluster socket": cluster} {
		dir := socketDir(address)
		if dir == "" {
			t.Errorf("the %s %s is not a unix socket: the pod shares sockets, not ports", what, address)
			continue
		}
		hm, sm := mountOf(host, dir), mountOf(sidecar, dir)
		switch {
		case hm == nil || sm == nil:
			t.Errorf("the %s's folder %s is not mounted in both containers (host: %v, sidecar: %v)", what, dir, hm, sm)
		case hm.Name != sm.Name || hm.MountPath != sm.MountPath:
			t.Errorf("the %s's folder %s is volume %s at %s in the host but %s at %s in the sidecar", what, dir, hm.Name, hm.MountPath, sm.Name, sm.MountPath)
		case hm.ReadOnly || sm.ReadOnly:
			t.Errorf("the %s's volume is mounted read-only: the server cannot create its socket", what)
		default:
			if v := volume(pod, hm.Name); v == nil || v.EmptyDir == nil {
				t.Errorf("the %s's volume %s is not an emptyDir", what, hm.Name)
			}
		}
	}
}

// serviceAccountDir is where client-go's in-cluster configuration reads the
// ServiceAccount's token, CA and namespace (rest.InClusterConfig).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// checkCredentials: the kubelet mounts no ServiceAccount token into the pod,
// the host mounts one where client-go looks for it, in the shape of the
// kubelet's own (token, the cluster's CA, the namespace), and no other
// container mounts a token, a Secret or anything at that path.
func checkCredentials(t *testing.T, pod *corev1.PodSpec, host *corev1.Container) {
	mustf(t, pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken,
		"the pod's automountServiceAccountToken is %v, want false: the kubelet would mount the host's token into the sidecar too", pod.AutomountServiceAccountToken)
	m := mountOf(host, serviceAccountDir)
	if m == nil || m.MountPath != serviceAccountDir {
		t.Errorf("the host mounts nothing at %s, where client-go's in-cluster configuration reads its token (mounts: %v)", serviceAccountDir, host.VolumeMounts)
	} else {
		mustf(t, m.ReadOnly, "the host's %s mount is not read-only", serviceAccountDir)
		checkServiceAccountVolume(t, volume(pod, m.Name))
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		if c.Name == host.Name {
			continue
		}
		for _, cm := range c.VolumeMounts {
			mustf(t, cm.MountPath != "/var/run/secrets" && !strings.HasPrefix(cm.MountPath, "/var/run/secrets/") && !strings.HasPrefix(serviceAccountDir, cm.MountPath+"/"),
				"%s: mounts %s at %s, at or above where client-go looks for a token", c.Name, cm.Name, cm.MountPath)
			v := volume(pod, cm.Name)
			if v == nil {
				t.Errorf("%s: mounts volume %s, which the pod does not have", c.Name, cm.Name)
				continue
			}
			mustf(t, v.Secret == nil, "%s: mounts Secret volume %s", c.Name, cm.Name)
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					mustf(t, src.ServiceAccountToken == nil && src.Secret == nil, "%s: mounts volume %s, which projects a token or a Secret", c.Name, cm.Name)
				}
			}
		}
	}
}

// checkServiceAccountVolume: the projected volume the kubelet mounts for a
// ServiceAccount (kube-api-access-*): a token named token, ca.crt from the
// kube-root-ca.crt ConfigMap, and the pod's namespace.
func checkServiceAccountVolume(t *testing.T, v *corev1.Volume) {
	if v == nil || v.Projected == nil {
		t.Errorf("the host's ServiceAccount volume is %v, want a projected volume", v)
		return
	}
	var token, ca, ns bool
	for _, src := range v.Projected.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			token = src.ServiceAccountToken.Path == "token" && src.ServiceAccountToken.Audience == ""
		case src.ConfigMap != nil:
			ca = src.ConfigMap.Name == "kube-root-ca.crt" && len(src.ConfigMap.Items) == 1 &&
				src.ConfigMap.Items[0].Key == "ca.crt" && src.ConfigMap.Items[0].Path == "ca.crt"
		case src.DownwardAPI != nil:
			ns = len(src.DownwardAPI.Items) == 1 && src.DownwardAPI.Items[0].Path == "namespace" &&
				src.DownwardAPI.Items[0].FieldRef != nil && src.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace"
		}
	}
	mustf(t, token, "volume %s: no serviceAccountToken at path token for the API server's audience", v.Name)
	mustf(t, ca, "volume %s: no ca.crt from the ConfigMap kube-root-ca.crt", v.Name)
	mustf(t, ns, "volume %s: no namespace from metadata.namespace", v.Name)
}

// checkHostProbes: startup, liveness and readiness on the host's health
// port; readiness on /readyz, which fails while the sidecar is unreachable;
// the startup probe outlasts the host's wait for its sidecar.
func checkHostProbes(t *testing.T, host *corev1.Container) {
	bind, ok := flagValue(host.Args, "health-probe-bind-address")
	if !ok {
		bind = ":8081"
	}
	_, portStr, err := net.SplitHostPort(bind)
	if err != nil {
		t.Fatalf("--health-probe-bind-address=%s: %v", bind, err)
	}
	port, _ := strconv.Atoi(portStr)
	for name, p := range map[string]*corev1.Probe{"startup": host.StartupProbe, "liveness": host.LivenessProbe, "readiness": host.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("host: no HTTP %s probe", name)
			continue
		}
		if got := portNumber(host, p.HTTPGet.Port); got != port {
			t.Errorf("host: the %s probe asks port %s (%d), the health endpoints listen on %d", name, p.HTTPGet.Port.String(), got, port)
		}
		want := "/healthz"
		if name == "readiness" {
			want = "/readyz"
		}
		mustf(t, p.HTTPGet.Path == want, "host: the %s probe asks %s, want %s", name, p.HTTPGet.Path, want)
	}
	if p := host.StartupProbe; p != nil {
		wait := 2 * time.Minute
		if v, ok := flagValue(host.Args, "sidecar-wait-timeout"); ok {
			if wait, err = time.ParseDuration(v); err != nil {
				t.Fatal(err)
			}
		}
		budget := time.Duration(p.FailureThreshold*p.PeriodSeconds+p.InitialDelaySeconds) * time.Second
		mustf(t, budget > wait, "host: the startup probe gives up after %s, before the host stops waiting for its sidecar (%s)", budget, wait)
	}
}

func portNumber(c *corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	return -1
}

// checkSidecarProbes: every sidecar probe runs the probe binary the init
// container copies from the host image into a volume the sidecar mounts, and
// asks the address the sidecar serves on.
func checkSidecarProbes(t *testing.T, ex example, pod *corev1.PodSpec, host, sidecar, install *corev1.Container) {
	mustf(t, install.Image == host.Image, "install-probe runs image %q, the probe ships in the host's, %q", install.Image, host.Image)
	if len(install.Command) != 2 || install.Command[0] != "/probe" {
		t.Fatalf("install-probe runs %q, want [/probe --copy-to=PATH] (the host image ships the probe at /probe)", install.Command)
	}
	dst, ok := strings.CutPrefix(install.Command[1], "--copy-to=")
	if !ok {
		t.Fatalf("install-probe runs %q, want [/probe --copy-to=PATH]", install.Command)
	}
	im := mountOf(install, path.Dir(dst))
	if im == nil || im.ReadOnly {
		t.Fatalf("install-probe copies the probe to %s, which is not on a writable volume", dst)
	}
	if v := volume(pod, im.Name); v == nil || v.EmptyDir == nil {
		t.Errorf("the probe's volume %s is not an emptyDir", im.Name)
	}
	var sm *corev1.VolumeMount
	for i, m := range sidecar.VolumeMounts {
		if m.Name == im.Name {
			sm = &sidecar.VolumeMounts[i]
		}
	}
	if sm == nil {
		t.Fatalf("the sidecar does not mount the probe's volume %s", im.Name)
	}
	mustf(t, sm.ReadOnly, "the sidecar mounts the probe's volume read-write: it should not be able to change its own probe")
	probePath := path.Join(sm.MountPath, strings.TrimPrefix(dst, im.MountPath))
	address := sidecarAddress(ex, sidecar)
	for name, p := range map[string]*corev1.Probe{"startup": sidecar.StartupProbe, "liveness": sidecar.LivenessProbe, "readiness": sidecar.ReadinessProbe} {
		if p == nil || p.Exec == nil {
			t.Errorf("sidecar: no exec %s probe", name)
			continue
		}
		cmd := p.Exec.Command
		mustf(t, slices0(cmd) == probePath, "sidecar: the %s probe runs %q, the init container copies the probe to %s", name, slices0(cmd), probePath)
		got, ok := flagValue(cmd[1:], "address")
		if !ok {
			got = defaultSidecarAddress
		}
		mustf(t, got == address, "sidecar: the %s probe asks %s, the sidecar serves on %s", name, got, address)
		timeout := time.Second
		if v, ok := flagValue(cmd[1:], "timeout"); ok {
			timeout, _ = time.ParseDuration(v)
		}
		mustf(t, time.Duration(max(p.TimeoutSeconds, 1))*time.Second > timeout,
			"sidecar: the %s probe's timeoutSeconds (%d) is not above the probe's own --timeout (%s)", name, p.TimeoutSeconds, timeout)
	}
}

// checkMetrics: the metrics port is a named container port the metrics
// Service targets.
func checkMetrics(t *testing.T, objs []*unstructured.Unstructured, host *corev1.Container) {
	bind, ok := flagValue(host.Args, "metrics-bind-address")
	if !ok || bind == "0" {
		return
	}
	_, portStr, _ := net.SplitHostPort(bind)
	port, _ := strconv.Atoi(portStr)
	found := false
	for _, u := range find(objs, "Service") {
		svc := typed[corev1.Service](t, u)
		for _, p := range svc.Spec.Ports {
			if p.Name == "https" {
				found = true
				mustf(t, portNumber(host, p.TargetPort) == port, "metrics Service %s targets %s, the host serves metrics on %d", svc.Name, p.TargetPort.String(), port)
			}
		}
	}
	mustf(t, found, "no Service exposes the host's metrics")
}

// checkWebhooks: the webhook configurations and conversion webhooks name the
// webhook Service, which targets the host's webhook port; the certificate is
// mounted where the host reads it, and is for that Service (cert-manager) or
// made by the host for it (self-signed).
func checkWebhooks(t *testing.T, objs []*unstructured.Unstructured, pod *corev1.PodSpec, host *corev1.Container) {
	var svc *corev1.Service
	for _, u := range find(objs, "Service") {
		s := typed[corev1.Service](t, u)
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() == "webhook-server" {
				svc = s
			}
		}
	}
	mutating := find(objs, "MutatingWebhookConfiguration")
	validating := find(objs, "ValidatingWebhookConfiguration")
	converted := convertedCRDs(t, objs)
	if svc == nil {
		mustf(t, len(mutating)+len(validating)+len(converted) == 0, "webhook configurations or conversions are rendered without the webhook Service (config/webhook)")
		return
	}
	webhookPort := 9443
	if v, ok := flagValue(host.Args, "webhook-port"); ok {
		webhookPort, _ = strconv.Atoi(v)
	}
	mustf(t, portNumber(host, intstr.FromString("webhook-server")) == webhookPort, "the host's webhook-server port is not its --webhook-port, %d", webhookPort)

	var refs []admissionregistrationv1.ServiceReference
	var configNames []string
	for _, u := range mutating {
		for _, w := range typed[admissionregistrationv1.MutatingWebhookConfiguration](t, u).Webhooks {
			refs = append(refs, *w.ClientConfig.Service)
		}
		configNames = append(configNames, u.GetName())
	}
	for _, u := range validating {
		for _, w := range typed[admissionregistrationv1.ValidatingWebhookConfiguration](t, u).Webhooks {
			refs = append(refs, *w.ClientConfig.Service)
		}
		configNames = append(configNames, u.GetName())
	}
	for _, crd := range converted {
		refs = append(refs, admissionregistrationv1.ServiceReference{
			Name:      nested(crd, "spec", "conversion", "webhook", "clientConfig", "service", "name"),
			Namespace: nested(crd, "spec", "conversion", "webhook", "clientConfig", "service", "namespace"),
			Port:      ptrInt32(crd, "spec", "conversion", "webhook", "clientConfig", "service", "port"),
		})
	}
	for _, r := range refs {
		port := int32(443)
		if r.Port != nil {
			port = *r.Port
		}
		mustf(t, r.Name == svc.Name && r.Namespace == svc.Namespace && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == port,
			"a webhook calls Service %s/%s:%d, the webhook Service is %s/%s:%d", r.Namespace, r.Name, port, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
	}

	certDir, ok := flagValue(host.Args, "webhook-cert-dir")
	if !ok {
		certDir = defaultCertDir
	}
	m := mountOf(host, certDir)
	if m == nil {
		t.Fatalf("nothing is mounted at the host's webhook cert dir %s (use config/certmanager or config/selfsigned)", certDir)
	}
	vol := volume(pod, m.Name)
	args := expandEnv(host, host.Args)
	if _, selfSigned := flagValue(args, "webhook-self-signed"); selfSigned {
		mustf(t, vol.EmptyDir != nil && !m.ReadOnly, "self-signed: the host writes its certificate to %s, which is not a writable emptyDir", certDir)
		name, _ := flagValue(args, "webhook-service-name")
		mustf(t, name == svc.Name, "self-signed: the certificate is for Service %q (--webhook-service-name), the webhook Service is %q", name, svc.Name)
		configName, _ := flagValue(args, "webhook-configuration-name")
		for _, n := range configNames {
			mustf(t, n == configName, "self-signed: the host sets the caBundle of configurations named %q, one is named %q", configName, n)
		}
		mustf(t, len(find(objs, "Certificate")) == 0, "self-signed: a cert-manager Certificate is rendered as well")
		return
	}
	certs := find(objs, "Certificate")
	if len(certs) != 1 {
		t.Fatalf("%d cert-manager Certificates rendered, want 1 (config/certmanager), or the host's --webhook-self-signed (config/selfsigned)", len(certs))
	}
	cert := certs[0]
	mustf(t, vol.Secret != nil && vol.Secret.SecretName == nested(cert, "spec", "secretName"),
		"the host's cert dir is not the Secret the Certificate fills (%s)", nested(cert, "spec", "secretName"))
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	want := svc.Name + "." + svc.Namespace + ".svc"
	mustf(t, len(dnsNames) > 0 && dnsNames[0] == want, "the Certificate is for %v, the webhook Service is %s", dnsNames, want)
	issuer := nested(cert, "spec", "issuerRef", "name")
	found := false
	for _, u := range find(objs, "Issuer") {
		found = found || (u.GetName() == issuer && u.GetNamespace() == cert.GetNamespace())
	}
	mustf(t, found, "the Certificate's issuer %s is not rendered", issuer)
	inject := cert.GetNamespace() + "/" + cert.GetName()
	for _, u := range append(append(append([]*unstructured.Unstructured{}, mutating...), validating...), converted...) {
		mustf(t, u.GetAnnotations()["cert-manager.io/inject-ca-from"] == inject,
			"%s %s: cert-manager.io/inject-ca-from is %q, want %q", u.GetKind(), u.GetName(), u.GetAnnotations()["cert-manager.io/inject-ca-from"], inject)
	}
}

// convertedCRDs are the CRDs with a conversion webhook.
func convertedCRDs(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range find(objs, "CustomResourceDefinition") {
		if nested(u, "spec", "conversion", "strategy") == "Webhook" {
			out = append(out, u)
		}
	}
	return out
}

func nested(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

func ptrInt32(u *unstructured.Unstructured, fields ...string) *int32 {
	v, ok, _ := unstructured.NestedInt64(u.Object, fields...)
	if !ok {
		return nil
	}
	i := int32(v)
	return &i
}
