// Package deploytest checks what deploy/ ships for Kubernetes, systemd and
// Prometheus: the Helm chart in deploy/helm/raftmaster passes `helm lint`,
// and every object `helm template` renders from it, under the default values
// and under testdata's, decodes strictly (no unknown field) into its
// k8s.io/api type, or, for the ServiceMonitor, into a type of the Prometheus
// Operator CRD's fields; the objects agree with each other and with the
// values; and deploy/kubernetes/raftmaster.yaml is exactly the chart's
// rendering. The systemd unit passes `systemd-analyze verify` and
// `security`. The alert rules in deploy/prometheus pass `promtool check
// rules` and their unit tests `promtool test rules` (promtool from Debian's
// prometheus package; the test says so and skips that part when it is
// missing).
//
// It is a module of its own so that the Kubernetes API types stay out of
// raftmaster's dependencies. Helm runs as `go run
// helm.sh/helm/v3/cmd/helm@v3.22.0`, from the Go module proxy.
package deploytest
