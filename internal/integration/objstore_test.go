package integration

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/fakes3"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/recordio"
)

const (
	s3AccessKey = "AKIAINTEGRATION"
	s3Secret    = "integration-secret-must-not-show"
)

// startObjectStore serves an in-memory S3 on 127.0.0.1 holding a dataset
// of records "0".."n-1" under s3://train-data/ds/, half of its files with
// their index objects, and sets the credentials in the environment the
// nodes inherit. It returns the endpoint and the serve flags that reach
// it.
func startObjectStore(t *testing.T, n, perFile, maxChunk int) (endpoint string, args []string) {
	t.Helper()
	s3 := fakes3.New(s3AccessKey)
	if err := s3.CreateBucket("train-data"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := filepath.Glob(writeDataset(t, dir, n, perFile, maxChunk))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		key := "ds/" + filepath.Base(f)
		if err := s3.Put("train-data", key, b); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := recordio.WriteIndexObjectFile(f); err != nil {
				t.Fatal(err)
			}
			idx, err := os.ReadFile(f + recordio.IndexSuffix)
			if err != nil {
				t.Fatal(err)
			}
			if err := s3.Put("train-data", key+recordio.IndexSuffix, idx); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := httptest.NewServer(s3)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3Secret)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials-file"))
	t.Setenv(objstore.EnvS3IAM, "false")
	return srv.URL, []string{"--dataset-buckets", "s3://train-data/ds,s3://no-such-bucket",
		"--s3-endpoint", srv.URL, "--s3-region", "us-east-1", "--s3-path-style", "true"}
}

// TestObjectStoreDatasetThroughLeaderKill: a 3-node cluster indexes a
// dataset of s3:// objects from an in-process S3 server, and trainers
// that read its chunks with ranged GETs go through a SIGKILL of the
// leader: every pass delivers every record exactly once. A pattern over a
// missing bucket fails with an error that names it.
func TestObjectStoreDatasetThroughLeaderKill(t *testing.T) {
	needsProcesses(t)
	const records = 200
	endpoint, args := startObjectStore(t, records, 50, 60)
	c := proccluster.Start(t, proccluster.Options{Args: append(args, "--chunks-per-task", "1", "--failover-grace", "2s")})
	c.WaitReady()
	setter := newClient(t, client.WithAddrs(c.APIAddrs()...))
	err := setter.SetDataset([]string{"s3://no-such-bucket/x/*.recordio"})
	if err == nil || !strings.Contains(err.Error(), `"s3://no-such-bucket" does not exist`) || strings.Contains(err.Error(), s3Secret) {
		t.Fatalf("a missing bucket: %v", err)
	}
	err = setter.SetDataset([]string{"s3://elsewhere/x/*.recordio"})
	if err == nil || !strings.Contains(err.Error(), "outside the buckets") {
		t.Fatalf("a bucket not allowed: %v", err)
	}
	if err := setter.SetDataset([]string{"s3://train-data/ds/train-*.recordio"}); err != nil {
		t.Fatal(err)
	}
	store := objstore.New(objstore.Config{S3Endpoint: endpoint, S3Region: "us-east-1", S3PathStyle: objstore.PathStyleOn, NoIAM: true})
	const trainers, passes = 3, 4
	var log passLog
	wait := startTrainers(t, trainers, passes, &log, client.WithAddrs(c.APIAddrs()...), client.WithBuffer(4),
		client.WithChunkOpener("s3", store.Opener()))
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 40 })
	leader := c.Leader()
	t.Logf("killing leader %s", leader.ID)
	c.Kill(leader)
	wait()
	checkPasses(t, &log, passes, records, false)
	c.Restart(leader)
	c.WaitReady()
	c.Converged(time.Minute)
}

// TestObjectStoreBadCredentials: a node whose credentials the store
// refuses fails SetDataset with an error that names the bucket and says
// access was denied, and holds no secret.
func TestObjectStoreBadCredentials(t *testing.T) {
	needsProcesses(t)
	_, args := startObjectStore(t, 20, 10, 60)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY")
	c := proccluster.Start(t, proccluster.Options{Nodes: 1, Args: args})
	c.WaitReady()
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	err := cl.SetDataset([]string{"s3://train-data/ds/train-*.recordio"})
	if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), "s3://train-data") ||
		strings.Contains(err.Error(), s3Secret) {
		t.Fatalf("bad credentials: %v", err)
	}
	for _, p := range c.Procs {
		if b, err := os.ReadFile(p.LogPath); err == nil && strings.Contains(string(b), s3Secret) {
			t.Fatalf("node %s logged the secret", p.ID)
		}
	}
}
