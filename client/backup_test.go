package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestBackupToStreamsFromTheLeader: through a follower's redirect, the
// client streams the leader's state into the writer, several buffers of
// it, and reports its index and the hash it checked.
func TestBackupToStreamsFromTheLeader(t *testing.T) {
	leader := apitest.NewLocal()
	leader.ID = "leader"
	for i := range 4 {
		res, err := leader.Apply(context.Background(), &fsm.KVCompareAndSet{Key: fmt.Sprintf("k%d", i), Value: bytes.Repeat([]byte{'v'}, 512<<10)})
		if err != nil || res.Err() != nil {
			t.Fatal(res, err)
		}
	}
	var leaderHits, followerHits counter
	startServer(t, leader, leaderHits.wrap)
	fb := &follower{Local: apitest.NewLocal(), leader: rpc.NodeRef{ID: "leader", APIAddr: leader.API}}
	fb.ID = "follower"
	fts := startServer(t, fb, followerHits.wrap)

	c := newClient(t, client.WithAddrs(fts.URL))
	var buf bytes.Buffer
	info, err := c.BackupTo(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	want := leader.FSM().SnapshotBytes()
	if !bytes.Equal(buf.Bytes(), want) || info.Size != int64(len(want)) {
		t.Fatalf("received %d bytes (info says %d), the leader's state has %d", buf.Len(), info.Size, len(want))
	}
	if info.StateHash != leader.FSM().StateHash() || info.Index != leader.FSM().AppliedIndex() || info.Version == "" {
		t.Fatalf("info %+v; the leader is at index %d with hash %s", info, leader.FSM().AppliedIndex(), leader.FSM().StateHash())
	}
	if followerHits.total() != 1 || leaderHits.total() != 1 {
		t.Fatalf("follower served %v, leader %v; want one request each", followerHits.String(), leaderHits.String())
	}
}

// backupServer serves GET /v1/backup with serve, counting the requests.
func backupServer(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != rpc.PathBackup {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		serve(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

// streamBackup writes body as a streamed backup with the given trailers
// (none when sum is ""); with cut, the connection is dropped after body
// instead.
func streamBackup(w http.ResponseWriter, body []byte, sum, size string, cut bool) {
	w.Header().Set("Content-Type", rpc.ContentTypeStream)
	w.Header().Set(rpc.HeaderBackupIndex, "7")
	w.Header().Set(rpc.HeaderBackupVersion, "test")
	w.Header().Set("Trailer", rpc.TrailerBackupSha256+", "+rpc.TrailerBackupSize)
	w.WriteHeader(http.StatusOK)
	w.Write(body)
	w.(http.Flusher).Flush()
	if cut {
		panic(http.ErrAbortHandler)
	}
	if sum != "" {
		w.Header().Set(rpc.TrailerBackupSha256, sum)
		w.Header().Set(rpc.TrailerBackupSize, size)
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestBackupToRefusesADamagedStream: a stream cut short (the connection
// dropped, or ended without its trailers), or whose bytes do not match
// the length or hash of its trailers, fails with ErrBackupCorrupt, after
// one request: what the writer received is not taken back by a retry.
func TestBackupToRefusesADamagedStream(t *testing.T) {
	body := bytes.Repeat([]byte("state"), 100<<10)
	cases := []struct {
		name, sum, size string
		cut             bool
		want            string
	}{
		{"connection dropped", hexSum(body), strconv.Itoa(len(body)), true, "broke off"},
		{"no trailers", "", "", false, "without its length and hash"},
		{"hash mismatch", hexSum([]byte("other")), strconv.Itoa(len(body)), false, "hash to " + hexSum(body)},
		{"length mismatch", hexSum(body), strconv.Itoa(len(body) + 1), false, "bytes received"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts, n := backupServer(t, func(w http.ResponseWriter, r *http.Request) {
				streamBackup(w, body, tc.sum, tc.size, tc.cut)
			})
			c := newClient(t, client.WithAddrs(ts.URL), client.WithRetry(time.Minute))
			var buf bytes.Buffer
			_, err := c.BackupTo(context.Background(), &buf)
			if !errors.Is(err, client.ErrBackupCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BackupTo: %v; want ErrBackupCorrupt saying %q", err, tc.want)
			}
			if got := n.Load(); got != 1 {
				t.Fatalf("%d requests, want 1", got)
			}
		})
	}
}

// TestBackupToOfAnEarlierServer: a server of an earlier release answers
// the JSON of the whole state; BackupTo writes it after checking its
// hash.
func TestBackupToOfAnEarlierServer(t *testing.T) {
	state := []byte("the state")
	for _, sum := range []string{hexSum(state), hexSum([]byte("other"))} {
		ts, _ := backupServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", rpc.ContentTypeJSON)
			json.NewEncoder(w).Encode(rpc.BackupResponse{Version: "old", Index: 3, StateHash: sum, Snapshot: state})
		})
		c := newClient(t, client.WithAddrs(ts.URL))
		var buf bytes.Buffer
		info, err := c.BackupTo(context.Background(), &buf)
		if sum != hexSum(state) {
			if !errors.Is(err, client.ErrBackupCorrupt) {
				t.Fatalf("a JSON backup with a wrong hash: %v", err)
			}
			continue
		}
		if err != nil || buf.String() != string(state) || info != (client.BackupInfo{Version: "old", Index: 3, StateHash: sum, Size: int64(len(state))}) {
			t.Fatalf("BackupTo: %+v, %q, %v", info, buf.String(), err)
		}
	}
}

// TestBackupToOutlastsTheAttemptTimeout: a stream that goes on well past
// the attempt timeout, which bounds only the wait for its first answer,
// completes; cancelling the caller's context ends it.
func TestBackupToOutlastsTheAttemptTimeout(t *testing.T) {
	const attempt = 50 * time.Millisecond
	body := bytes.Repeat([]byte("x"), 1<<20)
	started := make(chan struct{}, 1)
	ts, n := backupServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", rpc.ContentTypeStream)
		w.Header().Set(rpc.HeaderBackupIndex, "1")
		w.Header().Set("Trailer", rpc.TrailerBackupSha256+", "+rpc.TrailerBackupSize)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		select {
		case started <- struct{}{}:
		default: // a retry, on a machine slow enough to outlast the attempt timeout
		}
		if r.URL.Query().Has("hold") {
			<-r.Context().Done()
			return
		}
		// The rest comes after ten attempt timeouts.
		select {
		case <-time.After(10 * attempt):
		case <-r.Context().Done():
			return
		}
		w.Write(body[len(body)/2:])
		w.Header().Set(rpc.TrailerBackupSha256, hexSum(body))
		w.Header().Set(rpc.TrailerBackupSize, strconv.Itoa(len(body)))
	})
	c := newClient(t, client.WithAddrs(ts.URL), client.WithAttemptTimeout(attempt))
	var buf bytes.Buffer
	if info, err := c.BackupTo(context.Background(), &buf); err != nil || info.Size != int64(len(body)) || n.Load() != 1 {
		t.Fatalf("a slow stream: %+v, %v, after %d requests", info, err, n.Load())
	}
	<-started

	// A stream that never ends ends with the caller's context.
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.RawQuery = "hold"
		ts.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hold.Close)
	c = newClient(t, client.WithAddrs(hold.URL), client.WithAttemptTimeout(attempt))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := c.BackupTo(ctx, &buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled backup: %v, want context.Canceled", err)
	}
}
