package deploytest

import (
	"encoding/hex"
	"os"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkSecurity checks what keeps the cluster's Raft port to its own
// pods: Raft over mutual TLS (the certificates of tls.existingSecret, or
// the cluster key of a Secret, mounted where RAFTMASTER_CLUSTER_KEY_FILE
// says), never --insecure; a NetworkPolicy that admits the Raft port from
// the StatefulSet's pods only; and no service account token in the pods.
// keySecret is the Secret the key must come from ("" under TLS); chartKey
// whether the chart renders it.
func checkSecurity(t *testing.T, o *objects, tls bool, keySecret string, chartKey bool) {
	t.Helper()
	sts := o.statefulSets[0]
	spec := sts.Spec.Template.Spec
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken %v, want false: the pods never call the Kubernetes API", a)
	}
	c := spec.Containers[0]
	env := podEnv(t, c.Env, sts.Name+"-0", "training")
	if v, ok := env["RAFTMASTER_INSECURE"]; ok {
		t.Errorf("RAFTMASTER_INSECURE=%q: Raft must not run unauthenticated by default", v)
	}
	keyFile, hasKey := env["RAFTMASTER_CLUSTER_KEY_FILE"]
	switch {
	case tls && hasKey:
		t.Errorf("RAFTMASTER_CLUSTER_KEY_FILE=%q beside TLS certificates: serve takes one or the other", keyFile)
	case !tls && !hasKey:
		t.Errorf("neither TLS certificates nor a cluster key: Raft would be unauthenticated (serve refuses to start)")
	case !tls:
		checkKeyMount(t, sts, c, keyFile, keySecret)
	}
	var chartSecrets []*corev1.Secret
	for _, s := range o.secrets {
		if s.Name == keySecret {
			chartSecrets = append(chartSecrets, s)
		}
	}
	switch {
	case chartKey && len(chartSecrets) != 1:
		t.Errorf("the chart renders %d Secrets named %s, want the cluster key's", len(chartSecrets), keySecret)
	case chartKey:
		s := chartSecrets[0]
		key := string(s.Data[path.Base(keyFile)])
		if b, err := hex.DecodeString(key); err != nil || len(b) < 32 {
			t.Errorf("the cluster key %q: want 32 bytes or more, hex (%v)", key, err)
		}
		if s.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("the cluster key's Secret is not kept on uninstall (annotations %v)", s.Annotations)
		}
	case len(o.secrets) != 0:
		t.Errorf("the chart renders %d Secrets; want none with an existing Secret or TLS", len(o.secrets))
	}
	checkNetworkPolicy(t, o, sts)
}

// checkKeyMount checks that keyFile is an item of the mounted Secret
// secret, readable by the pod's group only.
func checkKeyMount(t *testing.T, sts *appsv1.StatefulSet, c corev1.Container, keyFile, secret string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path.Dir(keyFile) {
			continue
		}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if v.Secret.SecretName != secret {
				t.Errorf("the cluster key comes from Secret %s, want %s", v.Secret.SecretName, secret)
			}
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
				t.Errorf("the cluster key's mode %o is readable by every user", v.Secret.DefaultMode)
			}
			for _, item := range v.Secret.Items {
				if item.Path == path.Base(keyFile) {
					return
				}
			}
		}
	}
	t.Errorf("RAFTMASTER_CLUSTER_KEY_FILE=%q is not an item of a mounted Secret", keyFile)
}

// checkNetworkPolicy checks the chart's NetworkPolicy: it selects the
// pods, and admits the Raft port only from them, while the API port stays
// reachable.
func checkNetworkPolicy(t *testing.T, o *objects, sts *appsv1.StatefulSet) {
	t.Helper()
	if len(o.netpols) != 1 {
		t.Fatalf("%d NetworkPolicies, want one that keeps the Raft port to the StatefulSet's pods", len(o.netpols))
	}
	np := o.netpols[0]
	podLabels := labels.Set(sts.Spec.Template.Labels)
	checkSelects(t, "the NetworkPolicy", &np.Spec.PodSelector, podLabels)
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy types %v, want Ingress", np.Spec.PolicyTypes)
	}
	raft, api := false, false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Errorf("a rule admits every port: %+v", rule)
				continue
			}
			switch p.Port.String() {
			case "raft":
				raft = true
				if len(rule.From) == 0 {
					t.Errorf("the Raft port is admitted from anywhere")
				}
				for _, from := range rule.From {
					if from.PodSelector == nil || from.NamespaceSelector != nil || from.IPBlock != nil {
						t.Errorf("the Raft port is admitted from %+v, want the StatefulSet's pods only", from)
						continue
					}
					checkSelects(t, "the Raft port's peers", from.PodSelector, podLabels)
				}
			case "http":
				api = true
			default:
				t.Errorf("the NetworkPolicy admits port %s", p.Port.String())
			}
		}
	}
	if !raft || !api {
		t.Errorf("the NetworkPolicy admits Raft %v and the API %v; want both, Raft from the pods only", raft, api)
	}
}

// TestChartSecureByDefault: with the default values the pods run Raft
// over mutual TLS with a cluster key the chart makes (kept across
// upgrades and on uninstall), behind a NetworkPolicy that admits Raft
// from the StatefulSet's pods only, and mount no service account token.
// With TLS certificates they secure Raft instead; with an existing Secret
// the chart makes none; insecure is only ever asked for.
func TestChartSecureByDefault(t *testing.T) {
	checkSecurity(t, render(t, nil), false, "raftmaster-cluster-key", true)
	checkSecurity(t, render(t, []string{"full.yaml"}), true, "", false)
	checkSecurity(t, render(t, nil, "clusterKey.existingSecret=my-key", "clusterKey.key=k"), false, "my-key", false)

	o := render(t, nil, "insecure=true")
	env := podEnv(t, o.statefulSets[0].Spec.Template.Spec.Containers[0].Env, "raftmaster-0", "training")
	if env["RAFTMASTER_INSECURE"] != "true" || env["RAFTMASTER_CLUSTER_KEY_FILE"] != "" || len(o.secrets) != 0 {
		t.Errorf("insecure=true: RAFTMASTER_INSECURE=%q, key file %q, %d Secrets; want Raft without a key, as asked",
			env["RAFTMASTER_INSECURE"], env["RAFTMASTER_CLUSTER_KEY_FILE"], len(o.secrets))
	}
	o = render(t, nil, "networkPolicy.enabled=false")
	if len(o.netpols) != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies", len(o.netpols))
	}
}

// TestChartKeepsTheClusterKey: an upgrade never makes a new cluster key,
// which would lock the pods out of each other: the chart's Secret takes
// the key of the Secret already in the cluster (Helm's lookup, which
// `helm template` cannot run) and makes one only when there is none.
func TestChartKeepsTheClusterKey(t *testing.T) {
	b, err := os.ReadFile(chartDir + "/templates/clusterkey.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := string(b)
	lookup := `$existing := lookup "v1" "Secret" .Release.Namespace $name`
	reuse := `{{ .Values.clusterKey.key }}: {{ index $existing.data .Values.clusterKey.key }}`
	if !strings.Contains(tmpl, lookup) || !strings.Contains(tmpl, reuse) {
		t.Fatalf("templates/clusterkey.yaml does not render the key of the Secret in the cluster (want %q and %q):\n%s", lookup, reuse, tmpl)
	}
	if i, j := strings.Index(tmpl, reuse), strings.Index(tmpl, "randAlphaNum"); j < i {
		t.Fatalf("templates/clusterkey.yaml makes a key before it looks for the existing one:\n%s", tmpl)
	}
	// Without a Secret to find (helm template), each render makes a key
	// of its own: the lookup is what keeps it.
	a, c := render(t, nil), render(t, nil)
	if string(a.secrets[0].Data["cluster.key"]) == string(c.secrets[0].Data["cluster.key"]) {
		t.Fatal("two installs made the same cluster key")
	}
}
