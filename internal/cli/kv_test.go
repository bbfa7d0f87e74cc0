package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
)

// kvServer serves the API over one in-process FSM and returns a function
// that runs "raftmaster kv ARGS..." against it.
func kvServer(t *testing.T) (*apitest.Local, func(args ...string) (int, string, string)) {
	t.Helper()
	local := apitest.NewLocal()
	ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	return local, func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := RunWith(append([]string{"raftmaster", "kv", args[0], "--addr", local.API, "--retry", "5s"}, args[1:]...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
}

// TestKVCommands: kv cas stores at the version given, with its flags
// before or after KEY, and exits 2 when it does not swap; kv get prints
// the version and value, exits 2 for an absent key, and --json and --raw
// print the answer for scripts; --job picks the job's register.
func TestKVCommands(t *testing.T) {
	local, kv := kvServer(t)

	if code, out, errOut := kv("get", "rdzv"); code != kvMissExit || out != "" || !strings.Contains(errOut, `key "rdzv" does not exist`) {
		t.Fatalf("get of an absent key: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut := kv("cas", "rdzv", "--version", "0", "--value", "round 1")
	if code != 0 || out != "swapped: rdzv is at version 1\n" {
		t.Fatalf("cas: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = kv("get", "rdzv")
	if code != 0 || out != "key:     rdzv\nversion: 1\nvalue:   round 1\n" {
		t.Fatalf("get: exit %d, %q", code, out)
	}
	// A stale version: nothing changes, the key is shown, exit 2.
	code, out, errOut = kv("cas", "--version", "0", "--value", "other", "rdzv")
	if code != kvMissExit || !strings.Contains(out, "version: 1\nvalue:   round 1") || !strings.Contains(errOut, "is at version 1, not 0") {
		t.Fatalf("stale cas: exit %d, %q, %q", code, out, errOut)
	}
	// The value from a file, JSON output.
	file := filepath.Join(t.TempDir(), "state.bin")
	if err := os.WriteFile(file, []byte{0, 1, 2, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = kv("cas", "rdzv", "--version", "1", "--value-file", file, "--json")
	var ans kvAnswer
	if code != 0 || json.Unmarshal([]byte(out), &ans) != nil || ans.Swapped == nil || !*ans.Swapped || ans.Version != 2 || !bytes.Equal(ans.Value, []byte{0, 1, 2, 0xff}) {
		t.Fatalf("cas --value-file --json: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, _ := kv("get", "rdzv"); code != 0 || !strings.Contains(out, "4 bytes of binary data") {
		t.Fatalf("get of binary data: exit %d, %q", code, out)
	}
	if code, out, _ := kv("get", "rdzv", "--raw"); code != 0 || out != "\x00\x01\x02\xff" {
		t.Fatalf("get --raw: exit %d, %q", code, out)
	}
	if got := local.FSM().KV("default", "rdzv"); got.Version != 2 {
		t.Fatalf("the FSM holds %+v", got)
	}

	// --job, after KEY.
	if code, out, errOut := kv("cas", "rdzv", "--job", "job-a", "--value", "a"); code != 0 || !strings.HasPrefix(out, "swapped") {
		t.Fatalf("cas --job: exit %d, %q, %q", code, out, errOut)
	}
	if got := local.FSM().KV("job-a", "rdzv"); string(got.Value) != "a" {
		t.Fatalf("job-a holds %+v", got)
	}
	if code, out, _ := kv("get", "--job", "job-a", "--json", "rdzv"); code != 0 || !strings.Contains(out, `"value": "YQ=="`) {
		t.Fatalf("get --job --json: exit %d, %q", code, out)
	}

	// Usage errors change nothing.
	before := local.FSM().StateHash()
	for _, args := range [][]string{
		{"cas", "rdzv", "--version", "2"},
		{"cas", "rdzv", "--value", "x", "--value-file", file},
		{"cas", "rdzv", "extra", "--value", "x"},
		{"cas", "bad key", "--value", "x"},
		{"cas", "rdzv", "--value-file", filepath.Join(t.TempDir(), "absent")},
		{"cas", "rdzv", "--version", "-1", "--value", "x"},
		{"get"},
	} {
		if code, _, errOut := kv(args...); code != 1 || errOut == "" {
			t.Errorf("%q: exit %d, %q; want 1 with a message", args, code, errOut)
		}
	}
	if local.FSM().StateHash() != before {
		t.Fatal("a refused command changed the state")
	}
}

// TestKVDeleteCommand: kv delete deletes a key, or only at --version,
// exits 2 with the key's version when it does not delete, and with
// --prefix deletes every key under the prefix; --json prints the answer.
func TestKVDeleteCommand(t *testing.T) {
	local, kv := kvServer(t)
	for _, key := range []string{"run/0/a", "run/0/b", "run/1/a", "keep"} {
		if code, out, errOut := kv("cas", key, "--job", "job-a", "--value", key); code != 0 {
			t.Fatalf("cas %s: exit %d, %q, %q", key, code, out, errOut)
		}
	}
	v := local.FSM().KV("job-a", "keep").Version

	code, out, errOut := kv("delete", "keep", "--job", "job-a", "--version", fmt.Sprint(v+1))
	if code != kvMissExit || !strings.Contains(errOut, fmt.Sprintf("is at version %d, not %d", v, v+1)) || !local.FSM().KV("job-a", "keep").Found {
		t.Fatalf("delete of another version: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = kv("delete", "--job", "job-a", "keep", "--version", fmt.Sprint(v))
	if code != 0 || out != fmt.Sprintf("deleted: keep was at version %d\n", v) || local.FSM().KV("job-a", "keep").Found {
		t.Fatalf("delete: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = kv("delete", "keep", "--job", "job-a", "--json")
	var ans kvDeleteAnswer
	if code != kvMissExit || json.Unmarshal([]byte(out), &ans) != nil || ans.Deleted || ans.Found || !strings.Contains(errOut, `key "keep" does not exist`) {
		t.Fatalf("delete of an absent key: exit %d, %q, %q", code, out, errOut)
	}

	code, out, errOut = kv("delete", "--prefix", "run/0/", "--job", "job-a")
	if code != 0 || out != "deleted 2 keys under run/0/\n" {
		t.Fatalf("delete --prefix: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = kv("delete", "--prefix", "run/", "--job", "job-a", "--json")
	var pans kvPrefixAnswer
	if code != 0 || json.Unmarshal([]byte(out), &pans) != nil || pans.Deleted != 1 || pans.Prefix != "run/" {
		t.Fatalf("delete --prefix --json: exit %d, %q", code, out)
	}
	if n := local.FSM().KVCount("job-a", ""); n != 0 {
		t.Fatalf("%d keys left", n)
	}

	// Usage errors change nothing.
	kv("cas", "k", "--value", "v")
	before := local.FSM().StateHash()
	for _, args := range [][]string{
		{"delete"},
		{"delete", "a", "b"},
		{"delete", "bad key"},
		{"delete", "--prefix", ""},
		{"delete", "--prefix", "k", "--version", "1"},
	} {
		if code, _, errOut := kv(args...); code != 1 || errOut == "" {
			t.Errorf("%q: exit %d, %q; want 1 with a message", args, code, errOut)
		}
	}
	if local.FSM().StateHash() != before || !local.FSM().KV("default", "k").Found {
		t.Fatal("a refused command changed the state")
	}
}

// TestKVWatchCommand: kv watch prints the key once its version differs
// from --after (at once when it already does), says when it was deleted,
// and exits 2 with the key as it is when --timeout passes first; --json
// prints the answer.
func TestKVWatchCommand(t *testing.T) {
	local, kv := kvServer(t)
	if code, out, errOut := kv("cas", "rdzv", "--value", "round 1"); code != 0 {
		t.Fatalf("cas: exit %d, %q, %q", code, out, errOut)
	}
	get := "key:     rdzv\nversion: 1\nvalue:   round 1\n"
	if code, out, errOut := kv("watch", "rdzv"); code != 0 || out != get {
		t.Fatalf("watch of a key that exists: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut := kv("watch", "rdzv", "--after", "1", "--timeout", "0"); code != kvMissExit || out != get || !strings.Contains(errOut, `key "rdzv" is still at version 1`) {
		t.Fatalf("watch that timed out: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut := kv("watch", "--timeout", "10ms", "--json", "absent")
	var ans kvWatchAnswer
	if code != kvMissExit || json.Unmarshal([]byte(out), &ans) != nil || !ans.TimedOut || ans.Found || !strings.Contains(errOut, `key "absent" does not exist`) {
		t.Fatalf("watch --json of an absent key: exit %d, %q, %q", code, out, errOut)
	}

	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := kv("watch", "rdzv", "--after", "1", "--timeout", "1m")
		done <- result{code, out, errOut}
	}()
	// Through the backend: two runs of the command at once would share
	// the CLI library's global flags.
	if res, err := local.Apply(t.Context(), &fsm.KVCompareAndSet{Key: "rdzv", Version: 1, Value: []byte("round 2")}); err != nil || !res.Swapped {
		t.Fatalf("compare-and-set: %+v, %v", res, err)
	}
	if r := <-done; r.code != 0 || r.out != "key:     rdzv\nversion: 2\nvalue:   round 2\n" {
		t.Fatalf("watch of a key written: exit %d, %q, %q", r.code, r.out, r.err)
	}
	if code, out, errOut := kv("delete", "rdzv"); code != 0 {
		t.Fatalf("delete: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut := kv("watch", "rdzv", "--after", "2"); code != 0 || out != "deleted: rdzv no longer exists\n" {
		t.Fatalf("watch of a deleted key: exit %d, %q, %q", code, out, errOut)
	}

	for _, args := range [][]string{{"watch"}, {"watch", "a", "b"}, {"watch", "bad key"}, {"watch", "k", "--after", "-1"}} {
		if code, _, errOut := kv(args...); code != 1 || errOut == "" {
			t.Errorf("%q: exit %d, %q; want 1 with a message", args, code, errOut)
		}
	}
}
