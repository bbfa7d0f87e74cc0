package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/internal/fakes3"
	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestDatasetObjectStore: the leader lists and indexes s3:// patterns in
// the buckets --dataset-buckets allows, and refuses, unread and with a
// clear error that holds no secret, a pattern outside them, a missing
// bucket and credentials the store refuses. Nothing changes on a refusal.
func TestDatasetObjectStore(t *testing.T) {
	const secret = "Sup3rSecretValue-do-not-echo"
	s3 := fakes3.New("AKIAGOOD")
	for _, b := range []string{"data", "other"} {
		if err := s3.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	path := writeRecordIO(t, t.TempDir(), "train-0.recordio", 20, 5)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"train/a.recordio", "train/b.recordio"} {
		if err := s3.Put("data", k, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s3.Put("other", "train/a.recordio", b); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3)
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAGOOD")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store := objstore.New(objstore.Config{S3Endpoint: srv.URL, S3Region: "us-east-1", S3PathStyle: objstore.PathStyleOn, NoIAM: true})

	// Without --dataset-buckets, object-store patterns are refused.
	e := newEnv(t, testConfig(), nil, nil)
	r := e.post(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{"s3://data/train/*.recordio"}}, reqID(uuid.New(), 1)...)
	if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, "--dataset-buckets") {
		t.Fatalf("no allowed buckets: %q", msg)
	}

	cfg := testConfig()
	cfg.ObjectStore = store
	cfg.DatasetBuckets = []string{"s3://data/train", "s3://nobucket"}
	e = newEnv(t, cfg, nil, nil)
	before := e.state()
	for _, tc := range []struct {
		globs []string
		want  string
	}{
		{[]string{"s3://other/train/*.recordio"}, "outside the buckets"},
		{[]string{"s3://data/training*/x.recordio"}, "outside the buckets"},
		{[]string{"s3://data/train/*.recordio", "local/*.recordio"}, "not both"},
		{[]string{"s3://nobucket/x/*.recordio"}, `dataset bucket "s3://nobucket" does not exist`},
		{[]string{"s3://data/train/none-*.recordio"}, "no pattern matches"},
	} {
		r := e.post(rpc.PathDataset, rpc.SetDatasetRequest{Globs: tc.globs}, reqID(uuid.New(), 1)...)
		if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, tc.want) || strings.Contains(msg, secret) {
			t.Errorf("globs %q: message %q, want %q", tc.globs, msg, tc.want)
		}
	}
	// Credentials the store refuses.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIABAD")
	cfg.ObjectStore = objstore.New(store.Config())
	bad := newEnv(t, cfg, nil, nil)
	r = bad.post(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{"s3://data/train/*.recordio"}}, reqID(uuid.New(), 1)...)
	if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, "access denied") ||
		!strings.Contains(msg, "s3://data") || strings.Contains(msg, secret) {
		t.Fatalf("bad credentials: %q", msg)
	}
	if after := e.state(); after != before {
		t.Fatalf("refused datasets changed the state: %+v -> %+v", before, after)
	}

	var ds rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{"s3://data/train/*.recordio"}, Shuffle: ptr(false)}, &ds, reqID(uuid.New(), 1)...)
	if ds.Ignored || ds.Files != 2 || ds.Chunks != 40 {
		t.Fatalf("the dataset in the bucket: %+v", ds)
	}
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
	if len(got.Task.Chunks) == 0 || got.Task.Chunks[0].Path != "s3://data/train/a.recordio" {
		t.Fatalf("chunks %+v, want s3://data/train/a.recordio", got.Task.Chunks)
	}
}
