package client_test

import (
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/internal/fakes3"
	"github.com/raftmaster/raftmaster/objstore"
)

// TestReadObjectStoreChunks: with the object-store opener, trainers read
// a dataset of s3:// objects, each record exactly once per pass, with
// ranged GETs.
func TestReadObjectStoreChunks(t *testing.T) {
	const total, passes, clients = 60, 3, 3
	s3 := fakes3.New("AKIACLIENT")
	if err := s3.CreateBucket("data"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(writeRecords(t, total, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Put("data", "train/data.recordio", b); err != nil {
		t.Fatal(err)
	}
	s3srv := httptest.NewServer(s3)
	defer s3srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIACLIENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "client-secret")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	store := objstore.New(objstore.Config{S3Endpoint: s3srv.URL, S3Region: "us-east-1", S3PathStyle: objstore.PathStyleOn, NoIAM: true})
	ts := startServerWith(t, apitest.NewLocal(), httpapi.Config{ObjectStore: store, DatasetBuckets: []string{"s3://data/train"}}, nil)
	const pattern = "s3://data/train/*.recordio"

	setup := newClient(t, client.WithAddr(ts.URL))
	if _, err := setup.SetDatasetWithParams([]string{pattern}, client.DatasetParams{ChunksPerTask: 2}); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen [passes]map[string]int
		wg   sync.WaitGroup
	)
	for p := range seen {
		seen[p] = make(map[string]int)
	}
	errs := make(chan error, clients)
	for range clients {
		c := newClient(t, client.WithAddr(ts.URL), client.WithBuffer(1), client.WithChunkOpener("s3", store.Opener()))
		wg.Go(func() {
			errs <- readPasses(c, pattern, passes, func(pass int, r []byte) {
				mu.Lock()
				seen[pass][string(r)]++
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for p := range passes {
		for i := range total {
			if n := seen[p][strconv.Itoa(i)]; n != 1 {
				t.Errorf("pass %d: record %d seen %d times", p, i, n)
			}
		}
	}
	if s3.Requests("GET range") == 0 || s3.Requests("GET") > 2*passes {
		t.Errorf("ranged GETs %d, whole GETs %d: want the chunks read with ranged GETs", s3.Requests("GET range"), s3.Requests("GET"))
	}
}

func TestWithChunkOpenerRefusesBadSchemes(t *testing.T) {
	for _, scheme := range []string{"", "s3://", "a/b"} {
		if _, err := client.NewClient(client.WithAddr("127.0.0.1:1"), client.WithChunkOpener(scheme, objstore.New(objstore.Config{}).Opener())); err == nil {
			t.Errorf("scheme %q accepted", scheme)
		}
	}
}
