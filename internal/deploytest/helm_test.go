package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/raftmaster.yaml from the chart")

// helmModule is the Helm the tests run, built from the Go module proxy.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// Paths from this package's directory.
const (
	chartDir    = "../../deploy/helm/raftmaster"
	rawManifest = "../../deploy/kubernetes/raftmaster.yaml"
)

// helm runs Helm with args and returns its standard output; err carries
// its standard error. Helm's own state goes to a temporary directory.
// Under -short it skips the test, as every test that starts real
// processes does.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes: helm, which go run builds")
	}
	home := t.TempDir()
	cmd := exec.Command("go", append([]string{"run", helmModule}, args...)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false",
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// templateArgs renders the chart as release "raftmaster" in namespace
// "training", with the values files (from testdata) and --set pairs.
func templateArgs(valueFiles []string, set ...string) []string {
	args := []string{"template", "raftmaster", chartDir, "--namespace", "training"}
	for _, f := range valueFiles {
		args = append(args, "--values", filepath.Join("testdata", f))
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// objects are the rendered objects, decoded.
type objects struct {
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
	monitors     []*serviceMonitor
	secrets      []*corev1.Secret
	netpols      []*networkingv1.NetworkPolicy
}

// render runs `helm template` and decodes every object strictly.
func render(t *testing.T, valueFiles []string, set ...string) *objects {
	t.Helper()
	out, err := helm(t, templateArgs(valueFiles, set...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decodeAll splits a multi-document manifest and decodes each object into
// the type of its apiVersion and kind, refusing unknown and duplicate
// fields, and any kind the chart is not known to render.
func decodeAll(manifest string) (*objects, error) {
	objs := &objects{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if isBlank(doc) {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var target any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			objs.statefulSets, target = append(objs.statefulSets, o), o
		case "v1 Service":
			o := &corev1.Service{}
			objs.services, target = append(objs.services, o), o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			objs.pdbs, target = append(objs.pdbs, o), o
		case "v1 Secret":
			o := &corev1.Secret{}
			objs.secrets, target = append(objs.secrets, o), o
		case "networking.k8s.io/v1 NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			objs.netpols, target = append(objs.netpols, o), o
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := &serviceMonitor{}
			objs.monitors, target = append(objs.monitors, o), o
		default:
			return nil, fmt.Errorf("document %d: %s %s is not a kind the chart renders", i, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w\n%s", i, meta.Kind, err, doc)
		}
	}
}

// isBlank reports whether a YAML document holds only comments and space.
func isBlank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// TestHelmLint: the chart passes `helm lint --strict` with the default
// values and with every values file in testdata.
func TestHelmLint(t *testing.T) {
	for _, files := range [][]string{nil, {"full.yaml"}, {"hostpath.yaml"}} {
		args := []string{"lint", "--strict", chartDir}
		for _, f := range files {
			args = append(args, "--values", filepath.Join("testdata", f))
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestHelmRefusesValuesThatCannotWork: values the cluster could not run
// with stop `helm template` with a message that says why.
func TestHelmRefusesValuesThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"replicas=2"}, "replicas (2) must be at least bootstrapExpect (3)"},
		{[]string{"bootstrapExpect=0"}, "bootstrapExpect"},
		{[]string{"dataset.existingClaim=datasets", "dataset.hostPath=/srv/datasets"}, "set existingClaim or hostPath, not both"},
		{[]string{"image.tag=latest"}, "/image/tag"},
		{[]string{"podAntiAffinity=always"}, "podAntiAffinity"},
		{[]string{"raft.heartbeatTimeout=fast"}, "heartbeatTimeout"},
	} {
		_, err := helm(t, templateArgs(nil, tc.set...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: %v; want an error with %q", tc.set, err, tc.want)
		}
	}
}

// rawHeader opens deploy/kubernetes/raftmaster.yaml, above what `helm
// template` renders.
const rawHeader = `# raftmaster on Kubernetes without Helm: this file is the chart in
# deploy/helm/raftmaster rendered with its default values, as release
# "raftmaster" (make manifests writes it; a test fails when they differ).
# It runs in any namespace: pods advertise
# POD.raftmaster.NAMESPACE.svc.cluster.local through the downward API.
#   kubectl apply -n NAMESPACE -f deploy/kubernetes/raftmaster.yaml
# Set the image first: build it with make image and push it where the
# cluster pulls from. Raft between the pods is mutual TLS with a cluster
# key, from a Secret you make once in the namespace, before the first apply:
#   raftmaster keygen --out cluster.key
#   kubectl create secret generic -n NAMESPACE raftmaster-cluster-key --from-file=cluster.key
# A NetworkPolicy admits the Raft port from the pods only. docs/deploy.md
# says how to scale, and how to turn on tokens, TLS, a dataset volume and
# the ServiceMonitor (with the chart).
`

// rawValues are the values the raw manifest is rendered with: the
// chart's defaults, but a cluster key Secret the operator makes, since
// kubectl has no lookup to keep one the manifest would make.
var rawValues = []string{"--set", "clusterKey.existingSecret=raftmaster-cluster-key"}

// TestRawManifestIsTheChartRendered: deploy/kubernetes/raftmaster.yaml is
// the chart's rendering with the default values, and decodes as strictly.
// With -update, it is rewritten.
func TestRawManifestIsTheChartRendered(t *testing.T) {
	out, err := helm(t, append([]string{"template", "raftmaster", chartDir}, rawValues...)...)
	if err != nil {
		t.Fatal(err)
	}
	want := rawHeader + out
	if *update {
		if err := os.WriteFile(rawManifest, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(rawManifest)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from the chart's rendering; run make manifests and review the diff", rawManifest)
	}
	objs, err := decodeAll(string(got))
	if err != nil {
		t.Fatal(err)
	}
	checkObjects(t, objs, defaults())
	checkSecurity(t, objs, false, "raftmaster-cluster-key", false)
}
