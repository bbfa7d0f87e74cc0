package cli

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

// closedAddr returns an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// runWithin runs the command line args and returns its exit code and
// standard error, failing the test when it has not ended within limit.
func runWithin(t *testing.T, limit time.Duration, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- RunWith(append([]string{"raftmaster"}, args...), &stdout, &stderr) }()
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(limit):
		t.Fatalf("raftmaster %s still running after %v", strings.Join(args, " "), limit)
		return 0, ""
	}
}

// A wrong --addr fails soon, long before the command's 30 s retry budget,
// naming the address and what it did.
func TestWrongAddrFailsFast(t *testing.T) {
	addr := closedAddr(t)
	code, stderr := runWithin(t, 25*time.Second, "cluster", "inspect", "--addr", addr)
	if code == 0 {
		t.Fatalf("cluster inspect of a closed port succeeded")
	}
	if !strings.Contains(stderr, addr+": connection refused") {
		t.Fatalf("stderr %q: want it to name %s: connection refused", stderr, addr)
	}
	if !strings.HasPrefix(stderr, "raftmaster: ") || strings.Count(stderr, "raftmaster") != 1 {
		t.Fatalf("stderr %q: want one \"raftmaster: \" prefix", stderr)
	}
}

// --dial-timeout 0 makes a command wait for its --retry, as before.
func TestDialTimeoutZeroWaitsForRetry(t *testing.T) {
	addr := closedAddr(t)
	code, stderr := runWithin(t, time.Minute, "--dial-timeout", "0", "cluster", "inspect", "--addr", addr, "--retry", "6s")
	if code == 0 || !strings.Contains(stderr, "giving up") || strings.Contains(stderr, "no address of the cluster answered") {
		t.Fatalf("exit %d, stderr %q: want the --retry budget's give-up error", code, stderr)
	}
}
