package deploytest

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// expect is what the rendered objects must say, for a set of values.
type expect struct {
	fullname       string
	replicas       int
	founders       int
	image          string
	domain         string
	httpPort       int32
	dataset        string // "", "pvc" or "hostPath"
	datasetMount   string
	auth, tls      bool
	monitor, pdb   bool
	antiAffinity   string // soft, hard or ""
	spreads        int
	raftEnv        map[string]string
	extraEnv       map[string]string
	retainOnScaled bool
}

func defaults() expect {
	return expect{
		fullname: "raftmaster", replicas: 3, founders: 3, image: "raftmaster:0.1.0",
		domain: "cluster.local", httpPort: 8000, pdb: true, antiAffinity: "soft", retainOnScaled: true,
		raftEnv: map[string]string{
			"RAFTMASTER_HEARTBEAT_TIMEOUT": "300ms", "RAFTMASTER_ELECTION_TIMEOUT": "300ms",
			"RAFTMASTER_LEADER_LEASE_TIMEOUT": "300ms", "RAFTMASTER_FAILOVER_GRACE": "5s",
			"RAFTMASTER_SNAPSHOT_THRESHOLD": "8192", "RAFTMASTER_TRAILING_LOGS": "10240",
		},
	}
}

// TestChartDefaults: the objects of the default values.
func TestChartDefaults(t *testing.T) {
	checkObjects(t, render(t, nil), defaults())
}

// TestChartEverythingOn: five founders, zones, a dataset claim, tokens,
// TLS, the ServiceMonitor and slower Raft timing (testdata/full.yaml).
func TestChartEverythingOn(t *testing.T) {
	want := defaults()
	want.replicas, want.founders = 5, 5
	want.image = "registry.example.com/ml/raftmaster:v1.2.3"
	want.domain = "k8s.example.internal"
	want.dataset, want.datasetMount = "pvc", "/data"
	want.auth, want.tls, want.monitor = true, true, true
	want.antiAffinity, want.spreads = "hard", 1
	want.retainOnScaled = false
	want.raftEnv = map[string]string{
		"RAFTMASTER_HEARTBEAT_TIMEOUT": "1s", "RAFTMASTER_ELECTION_TIMEOUT": "2s",
		"RAFTMASTER_LEADER_LEASE_TIMEOUT": "500ms", "RAFTMASTER_FAILOVER_GRACE": "10s",
		"RAFTMASTER_SNAPSHOT_THRESHOLD": "16384", "RAFTMASTER_TRAILING_LOGS": "20480",
	}
	want.extraEnv = map[string]string{"RAFTMASTER_TASK_TIMEOUT": "2m"}
	checkObjects(t, render(t, []string{"full.yaml"}), want)
}

// TestChartHostPathDataset: a hostPath dataset at another mount path, no
// anti-affinity and no disruption budget (testdata/hostpath.yaml).
func TestChartHostPathDataset(t *testing.T) {
	want := defaults()
	want.dataset, want.datasetMount = "hostPath", "/datasets"
	want.antiAffinity, want.pdb = "", false
	checkObjects(t, render(t, []string{"hostpath.yaml"}), want)
}

// TestChartScaledUp: more replicas than founding members leaves the join
// list, and so every existing pod's template, unchanged: scaling does not
// restart the cluster.
func TestChartScaledUp(t *testing.T) {
	base := render(t, nil)
	scaled := render(t, nil, "replicas=5")
	want := defaults()
	want.replicas = 5
	checkObjects(t, scaled, want)
	a, b := base.statefulSets[0].Spec.Template, scaled.statefulSets[0].Spec.Template
	if !equality.Semantic.DeepEqual(a, b) {
		t.Fatal("the pod template changes with replicas: scaling would restart every pod")
	}
}

// TestPodEnvironment expands the environment of pod raftmaster-1 in
// namespace training as the kubelet does: the node is named after the pod,
// advertises fully qualified names, and lists the founders' by theirs.
func TestPodEnvironment(t *testing.T) {
	o := render(t, nil)
	env := podEnv(t, o.statefulSets[0].Spec.Template.Spec.Containers[0].Env, "raftmaster-1", "training")
	want := map[string]string{
		"RAFTMASTER_NODE_ID":          "raftmaster-1",
		"RAFTMASTER_RAFT_ADDR":        "0.0.0.0:7000",
		"RAFTMASTER_HTTP_ADDR":        "0.0.0.0:8000",
		"RAFTMASTER_RAFT_ADVERTISE":   "raftmaster-1.raftmaster.training.svc.cluster.local:7000",
		"RAFTMASTER_ADVERTISE_ADDR":   "raftmaster-1.raftmaster.training.svc.cluster.local:8000",
		"RAFTMASTER_ADDR":             "raftmaster-1.raftmaster.training.svc.cluster.local:8000",
		"RAFTMASTER_BOOTSTRAP_EXPECT": "3",
		"RAFTMASTER_DATA_DIR":         "/var/lib/raftmaster",
		"RAFTMASTER_JOIN": "raftmaster-0.raftmaster.training.svc.cluster.local:8000," +
			"raftmaster-1.raftmaster.training.svc.cluster.local:8000," +
			"raftmaster-2.raftmaster.training.svc.cluster.local:8000",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["RAFTMASTER_PEERS"]; ok {
		t.Error("RAFTMASTER_PEERS is set: a static peer list bootstraps on any empty volume")
	}
}

// envRef is a kubelet variable reference, $(NAME).
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv expands env for a pod as the kubelet does: in order, each value's
// $(NAME) replaced by an earlier variable's value. A reference to a
// variable not defined before fails the test (the kubelet would pass it
// through as text).
func podEnv(t *testing.T, env []corev1.EnvVar, pod, namespace string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range env {
		if e.ValueFrom != nil {
			switch f := e.ValueFrom.FieldRef; {
			case f != nil && f.FieldPath == "metadata.name":
				out[e.Name] = pod
			case f != nil && f.FieldPath == "metadata.namespace":
				out[e.Name] = namespace
			default:
				t.Fatalf("env %s: a source the test does not know: %+v", e.Name, e.ValueFrom)
			}
			continue
		}
		out[e.Name] = envRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v, ok := out[name]
			if !ok {
				t.Errorf("env %s refers to $(%s), not defined before it", e.Name, name)
			}
			return v
		})
	}
	return out
}

// checkObjects checks the rendered objects against each other and want.
func checkObjects(t *testing.T, o *objects, want expect) {
	t.Helper()
	if len(o.statefulSets) != 1 || len(o.services) != 2 {
		t.Fatalf("rendered %d StatefulSets and %d Services, want 1 and 2", len(o.statefulSets), len(o.services))
	}
	sts := o.statefulSets[0]
	checkNames(t, "StatefulSet", sts.ObjectMeta)
	if sts.Name != want.fullname || sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != want.replicas {
		t.Errorf("StatefulSet %s with %v replicas, want %s with %d", sts.Name, sts.Spec.Replicas, want.fullname, want.replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: the founding members must start together", sts.Spec.PodManagementPolicy)
	}
	scaled := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if !want.retainOnScaled {
		scaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenScaled != scaled || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("claim retention %+v, want whenScaled %s and whenDeleted Retain", p, scaled)
	}
	pod := sts.Spec.Template
	checkSelects(t, "the StatefulSet's selector", sts.Spec.Selector, pod.Labels)

	headless, api := checkServices(t, o.services, sts, want)
	checkPod(t, sts, want)
	checkPDBs(t, o, pod.Labels, want)
	checkMonitors(t, o.monitors, headless, api, want)
}

// checkNames checks an object's name and labels are valid for the API.
func checkNames(t *testing.T, kind string, m metav1.ObjectMeta) {
	t.Helper()
	for _, msg := range validation.IsDNS1123Label(m.Name) {
		t.Errorf("%s name %q: %s", kind, m.Name, msg)
	}
	for k, v := range m.Labels {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("%s label %s=%s: %s", kind, k, v, msg)
		}
	}
}

// checkSelects checks that sel is set and selects a pod with podLabels.
func checkSelects(t *testing.T, what string, sel *metav1.LabelSelector, podLabels map[string]string) {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		t.Errorf("%s is empty: it would select every pod", what)
		return
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !s.Matches(labels.Set(podLabels)) {
		t.Errorf("%s %v does not select the pods %v", what, sel, podLabels)
	}
}

// checkServices checks the headless Service the StatefulSet names and the
// client Service, and returns them.
func checkServices(t *testing.T, services []*corev1.Service, sts *appsv1.StatefulSet, want expect) (headless, api *corev1.Service) {
	t.Helper()
	for _, s := range services {
		checkNames(t, "Service", s.ObjectMeta)
		checkSelects(t, "Service "+s.Name+"'s selector", &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, sts.Spec.Template.Labels)
		switch s.Name {
		case sts.Spec.ServiceName:
			headless = s
		case want.fullname + "-api":
			api = s
		}
		for _, p := range s.Spec.Ports {
			if !hasContainerPort(sts, p.TargetPort.StrVal) {
				t.Errorf("Service %s port %s targets %q, no port of the container", s.Name, p.Name, p.TargetPort.String())
			}
		}
	}
	if headless == nil || api == nil {
		t.Fatalf("want the headless Service %q and the client Service %q", sts.Spec.ServiceName, want.fullname+"-api")
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want a headless Service that publishes pods before they are ready",
			headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	if api.Spec.ClusterIP == corev1.ClusterIPNone || api.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s must balance over ready pods only", api.Name)
	}
	return headless, api
}

func hasContainerPort(sts *appsv1.StatefulSet, name string) bool {
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// checkPod checks the pod template: image, flags, probes, resources,
// security, scheduling and volumes.
func checkPod(t *testing.T, sts *appsv1.StatefulSet, want expect) {
	t.Helper()
	spec := sts.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != want.image || strings.HasSuffix(c.Image, ":latest") || !strings.Contains(path.Base(c.Image), ":") {
		t.Errorf("image %q, want %q (tagged, never latest)", c.Image, want.image)
	}
	if len(c.Args) != 1 || c.Args[0] != "serve" {
		t.Errorf("args %q, want [serve]", c.Args)
	}

	env := podEnv(t, c.Env, want.fullname+"-0", "training")
	fqdn := func(ordinal int, port int32) string {
		return fmt.Sprintf("%s-%d.%s.training.svc.%s:%d", want.fullname, ordinal, sts.Spec.ServiceName, want.domain, port)
	}
	var founders []string
	for i := range want.founders {
		founders = append(founders, fqdn(i, want.httpPort))
	}
	flags := map[string]string{
		"RAFTMASTER_JOIN":             strings.Join(founders, ","),
		"RAFTMASTER_BOOTSTRAP_EXPECT": fmt.Sprint(want.founders),
		"RAFTMASTER_ADVERTISE_ADDR":   fqdn(0, want.httpPort),
	}
	for k, v := range want.raftEnv {
		flags[k] = v
	}
	for k, v := range want.extraEnv {
		flags[k] = v
	}
	for k, v := range flags {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}

	scheme := corev1.URISchemeHTTP
	if want.tls {
		scheme = corev1.URISchemeHTTPS
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Scheme != scheme ||
			!hasContainerPort(sts, p.probe.HTTPGet.Port.StrVal) {
			t.Errorf("%s probe %+v, want %s %s on a named port of the container", p.what, p.probe, scheme, p.path)
		}
	}

	for _, r := range []struct {
		what string
		list corev1.ResourceList
		name corev1.ResourceName
	}{{"requests", c.Resources.Requests, corev1.ResourceCPU}, {"requests", c.Resources.Requests, corev1.ResourceMemory}, {"limits", c.Resources.Limits, corev1.ResourceMemory}} {
		if q, ok := r.list[r.name]; !ok || q.IsZero() {
			t.Errorf("no %s %s", r.name, r.what)
		}
	}

	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 || psc.FSGroup == nil {
		t.Errorf("pod security context %+v: want a non-root uid and an fsGroup for the volume", psc)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
		!*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" {
		t.Errorf("container security context %+v: want no privilege escalation, a read-only root and no capabilities", sc)
	}

	checkScheduling(t, sts, want)
	checkVolumes(t, sts, c, env, want)
}

// checkScheduling checks the anti-affinity and topology spread rules.
func checkScheduling(t *testing.T, sts *appsv1.StatefulSet, want expect) {
	t.Helper()
	spec, podLabels := sts.Spec.Template.Spec, sts.Spec.Template.Labels
	var terms []corev1.PodAffinityTerm
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		terms = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if want.antiAffinity == "soft" {
			terms = nil
			for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				terms = append(terms, w.PodAffinityTerm)
			}
		}
	}
	switch {
	case want.antiAffinity == "" && spec.Affinity != nil:
		t.Errorf("affinity %+v, want none", spec.Affinity)
	case want.antiAffinity != "" && len(terms) != 1:
		t.Errorf("want one %s anti-affinity term, got %+v", want.antiAffinity, spec.Affinity)
	case want.antiAffinity != "":
		if terms[0].TopologyKey != corev1.LabelHostname {
			t.Errorf("anti-affinity on %q, want %s", terms[0].TopologyKey, corev1.LabelHostname)
		}
		checkSelects(t, "the anti-affinity term", terms[0].LabelSelector, podLabels)
	}
	if len(spec.TopologySpreadConstraints) != want.spreads {
		t.Errorf("%d topology spread constraints, want %d", len(spec.TopologySpreadConstraints), want.spreads)
	}
	for _, c := range spec.TopologySpreadConstraints {
		checkSelects(t, "the topology spread constraint on "+c.TopologyKey, c.LabelSelector, podLabels)
	}
}

// checkVolumes checks that every mount has a volume, the Raft state is on
// the claim, and the dataset, token and TLS files are where the flags say.
func checkVolumes(t *testing.T, sts *appsv1.StatefulSet, c corev1.Container, env map[string]string, want expect) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	claims := map[string]bool{}
	for _, pvc := range sts.Spec.VolumeClaimTemplates {
		claims[pvc.Name] = true
		if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
			t.Errorf("claim %s requests no storage", pvc.Name)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok && !claims[m.Name] {
			t.Errorf("mount %s at %s: no such volume or claim", m.Name, m.MountPath)
		}
		mounts[m.MountPath] = m
	}
	if m, ok := mounts[env["RAFTMASTER_DATA_DIR"]]; !ok || !claims[m.Name] {
		t.Errorf("the Raft directory %q is not on a volume claim (mounts %v)", env["RAFTMASTER_DATA_DIR"], c.VolumeMounts)
	}

	root := env["RAFTMASTER_DATASET_ROOT"]
	switch want.dataset {
	case "":
		if root != "" {
			t.Errorf("RAFTMASTER_DATASET_ROOT=%q with no dataset volume", root)
		}
	default:
		m, ok := mounts[root]
		v := volumes[m.Name]
		switch {
		case root != want.datasetMount || !ok || !m.ReadOnly:
			t.Errorf("RAFTMASTER_DATASET_ROOT=%q, mount %+v; want a read-only mount at %s", root, m, want.datasetMount)
		case root == env["RAFTMASTER_DATA_DIR"]:
			t.Errorf("the dataset and the Raft state share %s", root)
		case want.dataset == "pvc" && v.PersistentVolumeClaim == nil, want.dataset == "hostPath" && v.HostPath == nil:
			t.Errorf("dataset volume %+v, want a %s", v, want.dataset)
		}
	}

	secretFile := func(flag string, present bool) {
		file, ok := env[flag]
		if !present {
			if ok {
				t.Errorf("%s=%q but it is not configured", flag, file)
			}
			return
		}
		m, ok := mounts[path.Dir(file)]
		if !ok || volumes[m.Name].Secret == nil {
			t.Errorf("%s=%q is not in a mounted Secret", flag, file)
			return
		}
		for _, item := range volumes[m.Name].Secret.Items {
			if item.Path == path.Base(file) {
				return
			}
		}
		t.Errorf("%s=%q: the Secret %s has no item %s", flag, file, volumes[m.Name].Secret.SecretName, path.Base(file))
	}
	secretFile("RAFTMASTER_AUTH_TOKENS", want.auth)
	if want.auth {
		// serve refuses a token file that others may read: the Secret's
		// files are the pod's alone, and the CLI in the pod reads its
		// token from the same file, never from a command line.
		file := env["RAFTMASTER_AUTH_TOKENS"]
		if v := volumes[mounts[path.Dir(file)].Name]; v.Secret == nil || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0 {
			t.Errorf("the token file's Secret volume %+v: want a defaultMode others cannot read (0400)", v.Secret)
		}
		if env["RAFTMASTER_TOKEN_FILE"] != file {
			t.Errorf("RAFTMASTER_TOKEN_FILE=%q, want the token file %s for the CLI in the pod", env["RAFTMASTER_TOKEN_FILE"], file)
		}
	}
	for _, f := range []string{"RAFTMASTER_TLS_CERT", "RAFTMASTER_TLS_KEY", "RAFTMASTER_TLS_CA"} {
		secretFile(f, want.tls)
	}
}

// checkPDBs checks the disruption budget keeps a majority.
func checkPDBs(t *testing.T, o *objects, podLabels map[string]string, want expect) {
	t.Helper()
	if n := len(o.pdbs); (n == 1) != want.pdb || n > 1 {
		t.Fatalf("%d PodDisruptionBudgets, want pdb %v", n, want.pdb)
	}
	for _, p := range o.pdbs {
		checkNames(t, "PodDisruptionBudget", p.ObjectMeta)
		checkSelects(t, "the PodDisruptionBudget's selector", p.Spec.Selector, podLabels)
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("maxUnavailable %v, want 1: a majority stays up", p.Spec.MaxUnavailable)
		}
	}
}
