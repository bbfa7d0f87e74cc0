package cli

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/internal/fakes3"
	"github.com/raftmaster/raftmaster/recordio"
)

// TestRecordioPackWritesIndexObjects: pack writes FILE.idx beside each
// file, which decodes to the file's index; --no-index writes none.
func TestRecordioPackWritesIndexObjects(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "a.txt")
	writeLines(t, in, 0, 25)
	pattern := filepath.Join(dir, "out", "train-%03d.recordio")
	code, out, errOut := run(t, "pack", "--out", pattern, "--records-per-file", "10", "--max-chunk-size", "64", in)
	if code != 0 {
		t.Fatalf("pack exited %d: %s", code, errOut)
	}
	files := strings.Fields(out)
	if len(files) != 3 {
		t.Fatalf("pack printed %q", files)
	}
	for _, f := range files {
		checkIndexObject(t, f)
	}
	other := filepath.Join(dir, "other", "x-%03d.recordio")
	if code, _, errOut := run(t, "pack", "--no-index", "--out", other, "--records-per-file", "10", in); code != 0 {
		t.Fatalf("pack --no-index exited %d: %s", code, errOut)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "other", "*"+recordio.IndexSuffix)); len(m) != 0 {
		t.Fatalf("--no-index wrote %q", m)
	}
	// index writes them for existing files.
	code, out, errOut = run(t, "index", filepath.Join(dir, "other", "*.recordio"))
	if code != 0 {
		t.Fatalf("index exited %d: %s", code, errOut)
	}
	if got := strings.Fields(out); len(got) != 3 || !strings.HasSuffix(got[0], ".recordio"+recordio.IndexSuffix) {
		t.Fatalf("index printed %q", got)
	}
	for _, f := range strings.Fields(out) {
		checkIndexObject(t, strings.TrimSuffix(f, recordio.IndexSuffix))
	}
}

func checkIndexObject(t *testing.T, path string) {
	t.Helper()
	want, err := recordio.LoadIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path + recordio.IndexSuffix)
	if err != nil {
		t.Fatalf("no index object beside %s: %v", path, err)
	}
	obj, err := recordio.DecodeIndexObject(b)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if obj.Size != st.Size() || !reflect.DeepEqual(obj.Index, want) {
		t.Fatalf("%s: index object %+v, want size %d and %+v", path, obj, st.Size(), want)
	}
}

// TestRecordioIndexObjectStore: index writes the index object of s3://
// objects beside them, recording their entity tag.
func TestRecordioIndexObjectStore(t *testing.T) {
	s3 := fakes3.New("AKIACLI")
	if err := s3.CreateBucket("data"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := recordio.NewWriter(&buf, 100, recordio.Gzip)
	for i := range 50 {
		w.Write(bytes.Repeat([]byte{byte(i)}, 30))
	}
	w.Close()
	if err := s3.Put("data", "t/a.recordio", buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3)
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIACLI")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "cli-secret-value")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("RAFTMASTER_S3_IAM", "false")
	code, out, errOut := run(t, "index", "--s3-endpoint", srv.URL, "--s3-region", "us-east-1", "--s3-path-style", "true", "s3://data/t/*.recordio")
	if code != 0 || strings.TrimSpace(out) != "s3://data/t/a.recordio.idx" {
		t.Fatalf("index exited %d, printed %q: %s", code, out, errOut)
	}
	// Bad credentials: a clear error, no secret.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
	code, _, errOut = run(t, "index", "--s3-endpoint", srv.URL, "--s3-region", "us-east-1", "--s3-path-style", "true", "s3://data/t/*.recordio")
	if code == 0 || !strings.Contains(errOut, "access denied") || strings.Contains(errOut, "cli-secret-value") {
		t.Fatalf("bad credentials: exit %d, %q", code, errOut)
	}
}
