package cli

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestPprofServesProfiles: --pprof-addr serves the runtime profiles, and an
// address that cannot be bound fails the start instead of going unnoticed.
func TestPprofServesProfiles(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := l.Addr().String()
	defer l.Close()
	if err := servePprof(taken, hclog.NewNullLogger()); err == nil {
		t.Fatalf("serving profiles on %s, which is taken, did not fail", taken)
	}

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	if err := servePprof(addr, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("goroutine profile: %s %.200s", resp.Status, body)
	}
}
