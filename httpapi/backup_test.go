package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/rpc"
)

// fillKV stores n values of size bytes in the default job's register.
func fillKV(t *testing.T, e *env, n, size int) {
	t.Helper()
	for i := range n {
		value := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		res, err := e.local.Apply(context.Background(), &fsm.KVCompareAndSet{Key: fmt.Sprintf("key-%d", i), Value: value})
		if err != nil || res.Err() != nil || !res.Swapped {
			t.Fatalf("storing key-%d: %+v %v", i, res, err)
		}
	}
}

// getBackup sends GET /v1/backup with the given Accept header ("" for
// none) and reads the whole answer, trailers included.
func getBackup(t *testing.T, e *env, method, accept string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+rpc.PathBackup, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestBackupStreams: a request that asks for application/octet-stream
// gets the snapshot as raw bytes, several buffers long, with the index and
// version in headers and the SHA-256 and length, declared in the Trailer
// header, as trailers; they describe the bytes received, which are the
// leader's state. HEAD gets the headers alone.
func TestBackupStreams(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(20, fsm.DatasetParams{ChunksPerTask: 2, TaskTimeout: 1e9})
	fillKV(t, e, 6, 200<<10)
	want := e.local.FSM().SnapshotBytes()
	if len(want) < 1<<20 {
		t.Fatalf("a state of %d bytes: want several of the stream's buffers", len(want))
	}

	for _, accept := range []string{
		rpc.ContentTypeStream,
		"application/json;q=0.5, application/octet-stream",
		"application/octet-stream;q=0.9, application/json;q=0.9",
	} {
		resp, body := getBackup(t, e, http.MethodGet, accept)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != rpc.ContentTypeStream {
			t.Fatalf("Accept %q: status %d, Content-Type %q", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if idx := resp.Header.Get(rpc.HeaderBackupIndex); idx != strconv.FormatUint(e.local.FSM().AppliedIndex(), 10) {
			t.Errorf("index header %q, applied index %d", idx, e.local.FSM().AppliedIndex())
		}
		if resp.Header.Get(rpc.HeaderBackupVersion) == "" {
			t.Error("no version header")
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("Accept %q: %d bytes streamed, not the state's %d", accept, len(body), len(want))
		}
		sum := sha256.Sum256(body)
		if got := resp.Trailer.Get(rpc.TrailerBackupSha256); got != hex.EncodeToString(sum[:]) || got != e.local.FSM().StateHash() {
			t.Errorf("hash trailer %q, the body's %x, the state's %s", got, sum, e.local.FSM().StateHash())
		}
		if got := resp.Trailer.Get(rpc.TrailerBackupSize); got != strconv.Itoa(len(body)) {
			t.Errorf("size trailer %q, %d bytes received", got, len(body))
		}
	}

	resp, body := getBackup(t, e, http.MethodHead, rpc.ContentTypeStream)
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.Header.Get(rpc.HeaderBackupIndex) == "" {
		t.Fatalf("HEAD: status %d, %d bytes, headers %v", resp.StatusCode, len(body), resp.Header)
	}
}

// TestBackupJSONForOtherClients: a request that does not name the stream
// (clients of earlier releases send Accept: application/json), or prefers
// JSON, gets the JSON answer of earlier releases.
func TestBackupJSONForOtherClients(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	fillKV(t, e, 2, 1<<10)
	want := e.local.FSM().SnapshotBytes()
	for _, accept := range []string{"", rpc.ContentTypeJSON, "*/*", "application/*",
		"application/octet-stream;q=0.5, application/json", "application/octet-stream;q=0", "application/octet-stream;q=x"} {
		resp, body := getBackup(t, e, http.MethodGet, accept)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != rpc.ContentTypeJSON {
			t.Fatalf("Accept %q: status %d, Content-Type %q", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var b rpc.BackupResponse
		response{status: resp.StatusCode, body: body}.decode(t, &b)
		if !bytes.Equal(b.Snapshot, want) || b.StateHash != e.local.FSM().StateHash() || b.Index != e.local.FSM().AppliedIndex() {
			t.Fatalf("Accept %q: backup of index %d, hash %s; want the state", accept, b.Index, b.StateHash)
		}
	}
}

// TestBackupNeedsTheLeader: a follower redirects a backup, streamed or
// not, to the leader, and a node that cannot confirm a leader (its read
// barrier fails) answers no_leader with no state.
func TestBackupNeedsTheLeader(t *testing.T) {
	e, fake := fakeEnv(t)
	fillKV(t, e, 1, 1<<10)
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	for _, accept := range []string{rpc.ContentTypeStream, rpc.ContentTypeJSON} {
		r := e.do(http.MethodGet, rpc.PathBackup, nil, "Accept", accept)
		wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
		if loc := r.header.Get("Location"); loc != "http://10.0.0.2:8080"+rpc.PathBackup {
			t.Errorf("Accept %s: Location %q", accept, loc)
		}
		if r.header.Get(rpc.HeaderBackupIndex) != "" {
			t.Errorf("Accept %s: a redirect carries a backup index", accept)
		}
	}
	fake.follower(httpapi.ErrNoLeader, rpc.NodeRef{}, false)
	r := e.do(http.MethodGet, rpc.PathBackup, nil, "Accept", rpc.ContentTypeStream)
	wantError(t, r, http.StatusServiceUnavailable, rpc.CodeNoLeader)
	if r.header.Get(rpc.HeaderBackupIndex) != "" || r.header.Get("Trailer") != "" {
		t.Error("a refused backup carries the stream's headers")
	}
}
