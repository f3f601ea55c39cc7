package deploy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-gw/sluice/gateway/config"
)

const kubeDir = "../../deploy/kubernetes"

// manifests is every object of deploy/kubernetes/, decoded.
type manifests struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	namespaces  []*corev1.Namespace
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
}

// documents splits a YAML stream at its "---" lines, dropping documents
// that hold only comments.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---[ \t]*$`).Split(string(data), -1) {
		for line := range strings.SplitSeq(d, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(d))
				break
			}
		}
	}
	return docs
}

// decodeStrict decodes one document into obj, refusing unknown and
// duplicate fields: a misspelt or misplaced field is an error, as it is for
// `kubectl apply --validate=strict`.
func decodeStrict(doc []byte, obj any) error {
	return yaml.UnmarshalStrict(doc, obj)
}

// loadManifests decodes every file the kustomization lists into its typed
// API object, and checks that the kustomization lists every manifest in
// the directory.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(kubeDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeStrict(data, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if kust.APIVersion != "kustomize.config.k8s.io/v1beta1" || kust.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", kust.APIVersion, kust.Kind)
	}
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			onDisk = append(onDisk, b)
		}
	}
	listed := slices.Sorted(slices.Values(kust.Resources))
	if !slices.Equal(listed, onDisk) {
		t.Errorf("kustomization.yaml lists %v; the directory holds %v", listed, onDisk)
	}

	m := &manifests{}
	for _, name := range kust.Resources {
		data, err := os.ReadFile(filepath.Join(kubeDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(data) {
			where := fmt.Sprintf("%s, document %d", name, i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				d := &appsv1.Deployment{}
				m.deployments, obj = append(m.deployments, d), d
			case "v1 Service":
				s := &corev1.Service{}
				m.services, obj = append(m.services, s), s
			case "v1 ConfigMap":
				c := &corev1.ConfigMap{}
				m.configMaps, obj = append(m.configMaps, c), c
			case "v1 Secret":
				s := &corev1.Secret{}
				m.secrets, obj = append(m.secrets, s), s
			case "v1 Namespace":
				n := &corev1.Namespace{}
				m.namespaces, obj = append(m.namespaces, n), n
			case "policy/v1 PodDisruptionBudget":
				p := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, p), p
			case "autoscaling/v2 HorizontalPodAutoscaler":
				h := &autoscalingv2.HorizontalPodAutoscaler{}
				m.hpas, obj = append(m.hpas, h), h
			default:
				t.Fatalf("%s: no test knows %q %q; add it to loadManifests", where, tm.APIVersion, tm.Kind)
			}
			if err := decodeStrict(doc, obj); err != nil {
				t.Errorf("%s (%s): %v", where, tm.Kind, err)
			}
		}
	}
	if len(m.namespaces) != 1 || m.namespaces[0].Name != kust.Namespace {
		t.Errorf("the kustomization's namespace %q is not the one Namespace manifest", kust.Namespace)
	}
	return m
}

// sluiceParts returns the sluice Deployment, its container, its ConfigMap
// and its Secret, failing the test when one is missing.
func (m *manifests) sluice(t *testing.T) (*appsv1.Deployment, *corev1.Container, *corev1.ConfigMap, *corev1.Secret) {
	t.Helper()
	d := find(t, m.deployments, "sluice", "Deployment")
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "sluice" })
	if i < 0 {
		t.Fatal("the sluice Deployment has no container named sluice")
	}
	return d, &d.Spec.Template.Spec.Containers[i], find(t, m.configMaps, "sluice", "ConfigMap"), find(t, m.secrets, "sluice", "Secret")
}

// find returns the object named name among objs.
func find[T metav1.Object](t *testing.T, objs []T, name, kind string) T {
	t.Helper()
	for _, o := range objs {
		if o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s named %q", kind, name)
	var zero T
	return zero
}

// TestKubernetesManifestsDecode decodes every manifest strictly into the
// Kubernetes API types: an unknown, misplaced or
// duplicate field, or a value of the wrong type, fails.
func TestKubernetesManifestsDecode(t *testing.T) {
	m := loadManifests(t)
	if len(m.deployments) == 0 || len(m.services) == 0 || len(m.configMaps) == 0 || len(m.secrets) == 0 ||
		len(m.pdbs) == 0 || len(m.hpas) == 0 {
		t.Errorf("want a Deployment, Service, ConfigMap, Secret, PodDisruptionBudget and HorizontalPodAutoscaler; have %d, %d, %d, %d, %d, %d",
			len(m.deployments), len(m.services), len(m.configMaps), len(m.secrets), len(m.pdbs), len(m.hpas))
	}
}

// TestKubernetesSluiceConfig checks the ConfigMap's sluice config against
// the Deployment that runs it: the config passes validation with exactly
// the variables the Deployment sets; the container serves the file the
// ConfigMap volume mounts; the container's ports are the config's listen
// ports; the probes hit /healthz and /readyz on the admin port; and the
// preStop sleep plus server.shutdown_timeout fit in
// terminationGracePeriodSeconds with at most 10 s to spare.
func TestKubernetesSluiceConfig(t *testing.T) {
	m := loadManifests(t)
	d, c, cm, secret := m.sluice(t)
	pod := &d.Spec.Template.Spec

	// The variables the container gets: a Secret key must exist.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = "value-of-" + e.Name
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		s := find(t, m.secrets, ref.Name, "Secret")
		if _, ok := s.StringData[ref.Key]; !ok {
			if _, ok := s.Data[ref.Key]; !ok {
				t.Errorf("env %s reads key %q of Secret %s, which has no such key", e.Name, ref.Key, ref.Name)
			}
		}
	}
	for _, key := range []string{"admin-token", "redis-password"} {
		if _, ok := secret.StringData[key]; !ok {
			t.Errorf("Secret sluice has no %q", key)
		}
	}

	// args name the config file, which a ConfigMap volume provides.
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 == len(c.Args) {
		t.Fatalf("container args %v name no --config file", c.Args)
	}
	configPath := c.Args[i+1]
	key := mountedKey(t, pod, c, cm.Name, configPath)
	text, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %q", cm.Name, key)
	}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	cfg, err := config.Parse("configmap.yaml:"+key, []byte(text), lookup)
	if err != nil {
		t.Fatalf("the ConfigMap's config, with the Deployment's environment:\n%v", err)
	}
	if cfg.Admin.Token != env["SLUICE_ADMIN_TOKEN"] {
		t.Errorf("admin.token is %q, want it read from SLUICE_ADMIN_TOKEN", cfg.Admin.Token)
	}
	if cfg.Store.Type == "redis" && cfg.Store.Redis.Password != env["REDIS_PASSWORD"] {
		t.Errorf("store.redis.password is %q, want it read from REDIS_PASSWORD", cfg.Store.Redis.Password)
	}

	// Ports: the container's named ports are the config's listeners.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got, want := ports["http"], listenPort(t, cfg.Server.Listen); got != want {
		t.Errorf("container port http is %d; server.listen %q is port %d", got, cfg.Server.Listen, want)
	}
	if got, want := ports["admin"], listenPort(t, cfg.Admin.Listen); got != want {
		t.Errorf("container port admin is %d; admin.listen %q is port %d", got, cfg.Admin.Listen, want)
	}
	for _, probe := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", probe.name)
			continue
		}
		if probe.p.HTTPGet.Path != probe.path {
			t.Errorf("%s probe path %q, want %q", probe.name, probe.p.HTTPGet.Path, probe.path)
		}
		if got := portNumber(t, probe.p.HTTPGet.Port, ports); got != ports["admin"] {
			t.Errorf("%s probe port %v is %d, not the admin port %d", probe.name, probe.p.HTTPGet.Port.String(), got, ports["admin"])
		}
	}

	// Drain: preStop sleep, then SIGTERM and shutdown_timeout, within the grace period.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep: endpoints may still send traffic to a pod that has stopped accepting it")
	}
	sleep := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if pod.TerminationGracePeriodSeconds == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	need := sleep + cfg.Server.ShutdownTimeout
	if need > grace || grace-need > 10*time.Second {
		t.Errorf("preStop sleep %v + shutdown_timeout %v = %v; terminationGracePeriodSeconds %v should cover it with at most 10s to spare",
			sleep, cfg.Server.ShutdownTimeout, need, grace)
	}
}

// mountedKey returns the ConfigMap key that appears at path in container
// c, through a configMap volume of cmName.
func mountedKey(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, cmName, path string) string {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil || v.ConfigMap.Name != cmName {
				continue
			}
			if len(v.ConfigMap.Items) == 0 {
				return rel
			}
			for _, it := range v.ConfigMap.Items {
				if it.Path == rel {
					return it.Key
				}
			}
		}
	}
	t.Fatalf("no ConfigMap %s volume provides %s", cmName, path)
	return ""
}

// listenPort returns the port of a listen address such as ":8080".
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return int32(n)
}

// portNumber resolves a port given by number or by container port name.
func portNumber(t *testing.T, p intstr.IntOrString, named map[string]int32) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	n, ok := named[p.StrVal]
	if !ok {
		t.Errorf("port name %q is not a container port", p.StrVal)
	}
	return n
}

// TestKubernetesHardening checks the pod runs as a non-root user on a
// read-only root filesystem without privileges, with resources set.
func TestKubernetesHardening(t *testing.T) {
	m := loadManifests(t)
	for _, d := range m.deployments {
		pod := &d.Spec.Template.Spec
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("Deployment %s: the pod does not run as a non-root user", d.Name)
		}
		for _, c := range pod.Containers {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s/%s: no securityContext", d.Name, c.Name)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s/%s: the root filesystem is writable", d.Name, c.Name)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s/%s: privilege escalation is allowed", d.Name, c.Name)
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
				t.Errorf("%s/%s: capabilities are not all dropped", d.Name, c.Name)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: want cpu and memory requests and a memory limit", d.Name, c.Name)
			}
		}
	}
}

// TestKubernetesSelectors checks that what selects the pods selects them:
// each Deployment's selector matches its template, each Service, the
// PodDisruptionBudget and the Service's target ports reach a Deployment's
// pods and ports, and the HorizontalPodAutoscaler scales a Deployment
// within bounds that keep the budget satisfiable.
func TestKubernetesSelectors(t *testing.T) {
	m := loadManifests(t)
	podsOf := func(sel labels.Selector) []*appsv1.Deployment {
		var ds []*appsv1.Deployment
		for _, d := range m.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				ds = append(ds, d)
			}
		}
		return ds
	}
	for _, d := range m.deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector %v does not match its pod template's labels %v (%v)", d.Name, d.Spec.Selector, d.Spec.Template.Labels, err)
		}
	}
	for _, s := range m.services {
		ds := podsOf(labels.SelectorFromSet(s.Spec.Selector))
		if len(s.Spec.Selector) == 0 || len(ds) != 1 {
			t.Errorf("Service %s selects %d Deployments' pods, want 1", s.Name, len(ds))
			continue
		}
		named := map[string]int32{}
		for _, c := range ds[0].Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				named[p.Name] = p.ContainerPort
			}
		}
		for _, p := range s.Spec.Ports {
			if n := portNumber(t, p.TargetPort, named); !slices.Contains(mapsValues(named), n) {
				t.Errorf("Service %s port %s targets %v, not a container port of %s", s.Name, p.Name, p.TargetPort.String(), ds[0].Name)
			}
		}
	}
	for _, p := range m.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || len(podsOf(sel)) != 1 {
			t.Errorf("PodDisruptionBudget %s selects %d Deployments' pods, want 1 (%v)", p.Name, len(podsOf(sel)), err)
		}
	}
	for _, h := range m.hpas {
		ref := h.Spec.ScaleTargetRef
		d := find(t, m.deployments, ref.Name, "Deployment")
		if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" {
			t.Errorf("HorizontalPodAutoscaler %s targets %s %s", h.Name, ref.APIVersion, ref.Kind)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: want 2 ≤ minReplicas ≤ maxReplicas so that a disruption leaves a pod serving", h.Name)
		}
		if d.Spec.Replicas == nil || h.Spec.MinReplicas != nil && *d.Spec.Replicas < *h.Spec.MinReplicas {
			t.Errorf("Deployment %s starts below the autoscaler's minReplicas", d.Name)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Resources.Requests.Cpu().IsZero() {
				t.Errorf("%s/%s has no cpu request: CPU utilization is undefined for the autoscaler", d.Name, c.Name)
			}
		}
	}
}

func mapsValues(m map[string]int32) []int32 {
	var vs []int32
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

// TestDocumentsSplit pins the "---" splitting the other tests rely on.
func TestDocumentsSplit(t *testing.T) {
	got := documents([]byte("# only a comment\n---\na: 1\n---\n\n---\nb: 2\n"))
	if len(got) != 2 || !bytes.Contains(got[0], []byte("a: 1")) || !bytes.Contains(got[1], []byte("b: 2")) {
		t.Errorf("documents = %q, want the two documents with content", got)
	}
}
