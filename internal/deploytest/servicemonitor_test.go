package deploytest

import (
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serviceMonitor is monitoring.coreos.com/v1 ServiceMonitor with the
// fields of the Prometheus Operator's CRD schema (spec and endpoints, TLS
// and namespace selection); strict decoding into it refuses any other, as
// the API server refuses fields a structural CRD schema does not declare.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              serviceMonitorSpec `json:"spec"`
}

type serviceMonitorSpec struct {
	JobLabel          string               `json:"jobLabel,omitempty"`
	TargetLabels      []string             `json:"targetLabels,omitempty"`
	PodTargetLabels   []string             `json:"podTargetLabels,omitempty"`
	Endpoints         []monitorEndpoint    `json:"endpoints"`
	Selector          metav1.LabelSelector `json:"selector"`
	NamespaceSelector *struct {
		Any        bool     `json:"any,omitempty"`
		MatchNames []string `json:"matchNames,omitempty"`
	} `json:"namespaceSelector,omitempty"`
	SampleLimit *uint64 `json:"sampleLimit,omitempty"`
	TargetLimit *uint64 `json:"targetLimit,omitempty"`
}

type monitorEndpoint struct {
	Port              string                    `json:"port,omitempty"`
	TargetPort        *intstr.IntOrString       `json:"targetPort,omitempty"`
	Path              string                    `json:"path,omitempty"`
	Scheme            string                    `json:"scheme,omitempty"`
	Params            map[string][]string       `json:"params,omitempty"`
	Interval          string                    `json:"interval,omitempty"`
	ScrapeTimeout     string                    `json:"scrapeTimeout,omitempty"`
	TLSConfig         *monitorTLSConfig         `json:"tlsConfig,omitempty"`
	BearerTokenSecret *corev1.SecretKeySelector `json:"bearerTokenSecret,omitempty"`
	HonorLabels       bool                      `json:"honorLabels,omitempty"`
	HonorTimestamps   *bool                     `json:"honorTimestamps,omitempty"`
	FollowRedirects   *bool                     `json:"followRedirects,omitempty"`
	EnableHTTP2       *bool                     `json:"enableHttp2,omitempty"`
}

type monitorTLSConfig struct {
	CA                 *monitorSecretOrConfigMap `json:"ca,omitempty"`
	Cert               *monitorSecretOrConfigMap `json:"cert,omitempty"`
	KeySecret          *corev1.SecretKeySelector `json:"keySecret,omitempty"`
	ServerName         string                    `json:"serverName,omitempty"`
	InsecureSkipVerify bool                      `json:"insecureSkipVerify,omitempty"`
}

type monitorSecretOrConfigMap struct {
	Secret    *corev1.SecretKeySelector    `json:"secret,omitempty"`
	ConfigMap *corev1.ConfigMapKeySelector `json:"configMap,omitempty"`
}

// monitorDuration is the CRD's pattern for interval and scrapeTimeout.
var monitorDuration = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

// checkMonitors checks the ServiceMonitor, when there should be one: it
// selects the headless Service alone (every pod once, ready or not), on a
// port of it, at /metrics, with the CRD's duration format, and with the
// CA of the TLS Secret when the API serves TLS.
func checkMonitors(t *testing.T, monitors []*serviceMonitor, headless, api *corev1.Service, want expect) {
	t.Helper()
	if n := len(monitors); (n == 1) != want.monitor || n > 1 {
		t.Fatalf("%d ServiceMonitors, want one: %v", n, want.monitor)
	}
	for _, m := range monitors {
		checkNames(t, "ServiceMonitor", m.ObjectMeta)
		sel, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(headless.Labels)) || sel.Matches(labels.Set(api.Labels)) {
			t.Errorf("ServiceMonitor selector %v must select Service %s alone", m.Spec.Selector, headless.Name)
		}
		if m.Labels["release"] != "prometheus" {
			t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", m.Labels)
		}
		if len(m.Spec.Endpoints) != 1 {
			t.Fatalf("%d endpoints, want 1", len(m.Spec.Endpoints))
		}
		e := m.Spec.Endpoints[0]
		found := false
		for _, p := range headless.Spec.Ports {
			found = found || p.Name == e.Port
		}
		if !found || e.Path != "/metrics" {
			t.Errorf("endpoint port %q path %q, want a port of Service %s and /metrics", e.Port, e.Path, headless.Name)
		}
		if !monitorDuration.MatchString(e.Interval) || !monitorDuration.MatchString(e.ScrapeTimeout) {
			t.Errorf("interval %q, scrapeTimeout %q: not durations of the CRD", e.Interval, e.ScrapeTimeout)
		}
		switch {
		case !want.tls && e.Scheme != "http":
			t.Errorf("scheme %q, want http", e.Scheme)
		case want.tls && (e.Scheme != "https" || e.TLSConfig == nil || e.TLSConfig.CA == nil || e.TLSConfig.CA.Secret == nil ||
			e.TLSConfig.CA.Secret.Key != "ca.crt" || e.TLSConfig.ServerName == ""):
			t.Errorf("scheme %q, TLS %+v: want https verified with ca.crt of the TLS Secret", e.Scheme, e.TLSConfig)
		}
	}
}
