package objstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/internal/fakes3"
	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/recordio"
)

const (
	testAccessKey = "AKIATESTKEY"
	testSecret    = "s3cr3t-Never-Shown-Anywhere"
)

// startS3 serves an in-memory S3 with bucket "data" and returns a Store
// that reaches it with good credentials.
func startS3(t *testing.T) (*fakes3.Server, *objstore.Store, objstore.Config) {
	t.Helper()
	fs := fakes3.New(testAccessKey)
	if err := fs.CreateBucket("data"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	cfg := objstore.Config{S3Endpoint: srv.URL, S3Region: "us-east-1", S3PathStyle: objstore.PathStyleOn, NoIAM: true}
	return fs, objstore.New(cfg), cfg
}

// recordioFile returns a RecordIO file of n records in chunks of a few
// records, and the records.
func recordioFile(t *testing.T, n int, tag string) ([]byte, [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	w := recordio.NewWriter(&buf, 200, recordio.Snappy)
	var recs [][]byte
	for i := range n {
		r := fmt.Appendf(nil, "%s-%04d-%s", tag, i, strings.Repeat("x", i%50))
		recs = append(recs, r)
		if _, err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), recs
}

func TestGlobMatchesLikeLocalPatterns(t *testing.T) {
	fs, st, _ := startS3(t)
	for _, k := range []string{"train/a.recordio", "train/b.recordio", "train/b.recordio.idx", "train/sub/c.recordio",
		"train/notes.txt", "trainx/d.recordio", "train/"} {
		if err := fs.Put("data", k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Glob(t.Context(), []string{"s3://data/train/*.recordio", "s3://data/train/*/c.recordio", "s3://data/train/a.recordio"},
		recordio.IndexLimits{}, recordio.GlobLimits{})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, in := range got {
		urls = append(urls, in.URL)
	}
	want := []string{"s3://data/train/a.recordio", "s3://data/train/b.recordio", "s3://data/train/sub/c.recordio"}
	if !slices.Equal(urls, want) {
		t.Fatalf("Glob = %v, want %v", urls, want)
	}
	// A * pattern matches the data files, not their index objects.
	got, err = st.Glob(t.Context(), []string{"s3://data/train/b*"}, recordio.IndexLimits{}, recordio.GlobLimits{})
	if err != nil || len(got) != 1 || got[0].URL != "s3://data/train/b.recordio" {
		t.Fatalf("Glob b* = %v, %v", got, err)
	}
	for _, tc := range []struct {
		patterns []string
		want     error
	}{
		{[]string{"s3://data/none/*.recordio"}, recordio.ErrNoMatch},
		{[]string{"s3://data/train/[.recordio"}, recordio.ErrBadPattern},
		{[]string{"s3://d*/train/a.recordio"}, recordio.ErrBadPattern},
		{[]string{"s3://data/"}, recordio.ErrBadPattern},
		{[]string{"s3://data/*/*/*/*/*/x"}, recordio.ErrLimit},
	} {
		if _, err := st.Glob(t.Context(), tc.patterns, recordio.IndexLimits{}, recordio.GlobLimits{}); !errors.Is(err, tc.want) {
			t.Errorf("Glob(%q) = %v, want %v", tc.patterns, err, tc.want)
		}
	}
	if _, err := st.Glob(t.Context(), []string{"s3://data/train/*"}, recordio.IndexLimits{MaxFiles: 2}, recordio.GlobLimits{}); !errors.Is(err, recordio.ErrLimit) {
		t.Errorf("over MaxFiles: %v", err)
	}
	if _, err := st.Glob(t.Context(), []string{"s3://data/train/*"}, recordio.IndexLimits{}, recordio.GlobLimits{MaxVisited: 2}); !errors.Is(err, recordio.ErrLimit) {
		t.Errorf("over MaxVisited: %v", err)
	}
}

func TestIndexUsesIndexObjectInOneGet(t *testing.T) {
	fs, st, _ := startS3(t)
	data, _ := recordioFile(t, 300, "a")
	want, err := recordio.LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if want.NumChunks() < 10 {
		t.Fatalf("want many chunks, got %d", want.NumChunks())
	}
	if err := fs.Put("data", "a.recordio", data); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Without an index object, the headers are read.
	files, err := st.Glob(ctx, []string{"s3://data/a.recordio"}, recordio.IndexLimits{}, recordio.GlobLimits{})
	if err != nil {
		t.Fatal(err)
	}
	fs.ResetRequests()
	chunks, sum, stats, err := st.Index(ctx, files, recordio.IndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.HeaderScans != 1 || sum.Chunks != want.NumChunks() || sum.Records != 300 {
		t.Fatalf("scan: stats %+v, summary %+v", stats, sum)
	}
	// The chunks are small: their headers come a window of them a GET.
	if r := fs.Requests("GET range"); r < 1 || r > (len(data)+64<<10-1)/(64<<10) {
		t.Errorf("header scan made %d ranged GETs for %d chunks of %d bytes together", r, want.NumChunks(), len(data))
	}
	scanned := chunks
	// recordio index writes the index object; then one GET and one
	// ranged GET index the file.
	if _, err := st.WriteIndexObject(ctx, "s3://data/a.recordio"); err != nil {
		t.Fatal(err)
	}
	fs.ResetRequests()
	chunks, _, stats, err = st.Index(ctx, files, recordio.IndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.IndexObjects != 1 || stats.HeaderScans != 0 {
		t.Fatalf("stats %+v, want the index object used", stats)
	}
	if g, r := fs.Requests("GET"), fs.Requests("GET range"); g != 1 || r != 1 {
		t.Errorf("indexing from the index object made %d GETs and %d ranged GETs, want 1 and 1", g, r)
	}
	if !reflect.DeepEqual(chunks, scanned) {
		t.Fatalf("chunks from the index object differ from the scan")
	}
}

func TestIndexFallsBackFromBadIndexObjects(t *testing.T) {
	fs, st, _ := startS3(t)
	ctx := t.Context()
	data, _ := recordioFile(t, 100, "a")
	other, _ := recordioFile(t, 120, "b")
	idxOther, err := recordio.LoadIndex(bytes.NewReader(other))
	if err != nil {
		t.Fatal(err)
	}
	want, err := recordio.LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := recordio.EncodeIndexObject(idxOther, int64(len(other)), "")
	sameSize := &recordio.Index{ChunkOffsets: []int64{0}, ChunkLens: []uint32{100}, ChunkRecords: []int{100}, NumRecords: 100}
	lying, _ := recordio.EncodeIndexObject(sameSize, int64(len(data)), "")
	good, _ := recordio.EncodeIndexObject(want, int64(len(data)), "")
	wrongTag, _ := recordio.EncodeIndexObject(want, int64(len(data)), "0123456789abcdef")
	damaged := slices.Clone(good)
	damaged[len(damaged)/2] ^= 1
	for name, idx := range map[string][]byte{"stale": stale, "same-size lie": lying, "damaged": damaged,
		"garbage": []byte("not an index"), "other etag": wrongTag} {
		t.Run(name, func(t *testing.T) {
			if err := fs.Put("data", "f.recordio", data); err != nil {
				t.Fatal(err)
			}
			if err := fs.Put("data", "f.recordio.idx", idx); err != nil {
				t.Fatal(err)
			}
			files, err := st.Glob(ctx, []string{"s3://data/f.recordio"}, recordio.IndexLimits{}, recordio.GlobLimits{})
			if err != nil {
				t.Fatal(err)
			}
			chunks, sum, stats, err := st.Index(ctx, files, recordio.IndexLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if stats.HeaderScans != 1 || sum.Records != 100 || len(chunks) != want.NumChunks() {
				t.Fatalf("stats %+v, summary %+v: want a header scan of the real file", stats, sum)
			}
			for i, c := range chunks {
				if c.Offset != want.ChunkOffsets[i] || int(c.Records) != want.ChunkRecords[i] {
					t.Fatalf("chunk %d: %+v", i, c)
				}
			}
		})
	}
}

func TestIndexCorruptObjectIsAnError(t *testing.T) {
	fs, st, _ := startS3(t)
	data, _ := recordioFile(t, 50, "a")
	data[len(data)/2] ^= 0xff
	if err := fs.Put("data", "bad.recordio", append(data, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	files, err := st.Glob(t.Context(), []string{"s3://data/bad.recordio"}, recordio.IndexLimits{}, recordio.GlobLimits{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = st.Index(t.Context(), files, recordio.IndexLimits{})
	var fe *recordio.FileError
	if !errors.As(err, &fe) || fe.Path != "s3://data/bad.recordio" || !errors.Is(err, recordio.ErrCorrupt) {
		t.Fatalf("got %v, want a corrupt-file error naming the object", err)
	}
}

func TestObjectReadsChunksWithRangedGets(t *testing.T) {
	fs, st, _ := startS3(t)
	data, recs := recordioFile(t, 400, "r")
	if err := fs.Put("data", "r.recordio", data); err != nil {
		t.Fatal(err)
	}
	idx, err := recordio.LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	o, err := st.Open(t.Context(), "s3://data/r.recordio")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Size() != int64(len(data)) {
		t.Fatalf("size %d, want %d", o.Size(), len(data))
	}
	// A small readahead makes chunks cross buffers.
	o.SetReadahead(77)
	var got [][]byte
	for i := range idx.NumChunks() {
		s := recordio.NewRangeScanner(o, idx.ChunkIndex(i), 0, -1)
		for s.Scan() {
			got = append(got, slices.Clone(s.Record()))
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("read %d records, want %d equal", len(got), len(recs))
	}
	// ReadAt and Read at the end.
	buf := make([]byte, 10)
	if n, err := o.ReadAt(buf, int64(len(data))-4); n != 4 || err != io.EOF {
		t.Fatalf("ReadAt at the end: %d, %v", n, err)
	}
	whole := make([]byte, len(data))
	if _, err := o.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	o.SetReadahead(objstore.DefaultReadahead)
	fs.ResetRequests()
	if _, err := io.ReadFull(o, whole); err != nil || !bytes.Equal(whole, data) {
		t.Fatalf("ReadFull: %v", err)
	}
	if r := fs.Requests("GET range"); r != 1 {
		t.Errorf("reading %d bytes with a 1 MiB readahead made %d GETs", len(data), r)
	}
}

func TestMissingBucketAndObjectErrors(t *testing.T) {
	_, st, _ := startS3(t)
	_, err := st.Glob(t.Context(), []string{"s3://nobucket/x/*.recordio"}, recordio.IndexLimits{}, recordio.GlobLimits{})
	if !errors.Is(err, objstore.ErrNoBucket) || !strings.Contains(err.Error(), "s3://nobucket") {
		t.Fatalf("missing bucket: %v", err)
	}
	_, err = st.Open(t.Context(), "s3://data/none.recordio")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://data/none.recordio") {
		t.Fatalf("missing object: %v", err)
	}
}

func TestBadCredentialsErrorLeaksNoSecret(t *testing.T) {
	_, st, cfg := startS3(t)
	_ = st
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWRONG")
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecret)
	bad := objstore.New(cfg)
	_, err := bad.Glob(t.Context(), []string{"s3://data/*.recordio"}, recordio.IndexLimits{}, recordio.GlobLimits{})
	if !errors.Is(err, objstore.ErrAccessDenied) || !strings.Contains(err.Error(), "s3://data") {
		t.Fatalf("bad credentials: %v", err)
	}
	if strings.Contains(err.Error(), testSecret) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testSecret) {
		t.Fatalf("the error holds the secret: %v", err)
	}
	_, err = bad.Open(t.Context(), "s3://data/a.recordio")
	if !errors.Is(err, objstore.ErrAccessDenied) || strings.Contains(fmt.Sprintf("%v %#v", err, err), testSecret) {
		t.Fatalf("bad credentials on open: %v", err)
	}
	if s := fmt.Sprintf("%+v %#v", cfg, cfg); strings.Contains(s, testSecret) {
		t.Fatalf("the config holds the secret: %s", s)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(objstore.EnvS3Endpoint, "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
	t.Setenv(objstore.EnvS3Region, "")
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv(objstore.EnvS3PathStyle, "true")
	t.Setenv(objstore.EnvS3IAM, "false")
	t.Setenv(objstore.EnvGSEndpoint, "")
	cfg, err := objstore.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := objstore.Config{S3Endpoint: "http://127.0.0.1:9000", S3Region: "eu-west-3", S3PathStyle: objstore.PathStyleOn, NoIAM: true}
	if cfg != want {
		t.Fatalf("ConfigFromEnv = %+v, want %+v", cfg, want)
	}
	t.Setenv(objstore.EnvS3PathStyle, "sideways")
	if _, err := objstore.ConfigFromEnv(); err == nil {
		t.Fatal("a bad path style was accepted")
	}
	// An endpoint with user information is refused without quoting it.
	st := objstore.New(objstore.Config{S3Endpoint: "http://user:hunter2@127.0.0.1:1"})
	_, err = st.Stat(t.Context(), "s3://data/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("endpoint with a password: %v", err)
	}
}

func TestGSUsesHMACKeys(t *testing.T) {
	fs := fakes3.New("GOOGHMACID")
	if err := fs.CreateBucket("gdata"); err != nil {
		t.Fatal(err)
	}
	data, _ := recordioFile(t, 20, "g")
	if err := fs.Put("gdata", "x/a.recordio", data); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	t.Setenv(objstore.EnvGSAccessKey, "GOOGHMACID")
	t.Setenv(objstore.EnvGSSecretKey, "gs-secret-never-shown")
	st := objstore.New(objstore.Config{GSEndpoint: srv.URL})
	files, err := st.Glob(t.Context(), []string{"gs://gdata/x/*.recordio"}, recordio.IndexLimits{}, recordio.GlobLimits{})
	if err != nil || len(files) != 1 || files[0].URL != "gs://gdata/x/a.recordio" {
		t.Fatalf("gs Glob = %v, %v", files, err)
	}
	_, sum, _, err := st.Index(t.Context(), files, recordio.IndexLimits{})
	if err != nil || sum.Records != 20 {
		t.Fatalf("gs Index: %+v, %v", sum, err)
	}
	t.Setenv(objstore.EnvGSAccessKey, "OTHER")
	_, err = objstore.New(objstore.Config{GSEndpoint: srv.URL}).Stat(t.Context(), "gs://gdata/x/a.recordio")
	if !errors.Is(err, objstore.ErrAccessDenied) || strings.Contains(err.Error(), "gs-secret-never-shown") {
		t.Fatalf("gs with a wrong key: %v", err)
	}
}
