//go:build heavy

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// floodClients is how many fresh client ids the flood writes under: more
// than the 16,384 clients the de-duplication table held before it kept a
// window, so that the old table would have forgotten every client.
const floodClients = 16_500

// TestDedupSurvivesFloodOfNewClients: a trainer's writes are answered, the
// answers lost, and before the trainer retries, other clients write under
// more fresh client ids than the old table held (any token can, in any
// job). The retries, within the de-duplication window, are still answered
// with their first outcomes: a compare-and-set that swapped says swapped,
// with its version; a GetTask names the same task and lease, and leases no
// second one; a DeleteJob does not delete the job created again since.
func TestDedupSurvivesFloodOfNewClients(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	c.WaitFor("protocol level 2", 60*time.Second, func() bool {
		st, err := proccluster.Status(context.Background(), c.Leader().APIAddr)
		return err == nil && st.ClusterProtocol >= 2
	})
	leader := "http://" + c.Leader().APIAddr
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	trainer := uuid.New()
	ctx := context.Background()

	dir := t.TempDir()
	glob := writeDataset(t, dir, 40, 10, 64)
	writeAs(t, hc, leader+rpc.PathDataset, fmt.Sprintf("%s/1", trainer), rpc.SetDatasetRequest{Globs: []string{glob}, ChunksPerTask: 1}, nil)

	var cas rpc.KVCompareAndSetResponse
	casReq := rpc.KVCompareAndSetRequest{Key: "rdzv/state", Version: 0, Value: []byte("round 1")}
	writeAs(t, hc, leader+rpc.PathKVCompareAndSet, fmt.Sprintf("%s/2", trainer), casReq, &cas)
	if !cas.Swapped {
		t.Fatalf("first compare-and-set %+v, want swapped", cas)
	}
	var task rpc.GetTaskResponse
	writeAs(t, hc, leader+rpc.PathTaskGet, fmt.Sprintf("%s/3", trainer), rpc.GetTaskRequest{Pass: 0}, &task)
	const job = "scratch"
	writeAs(t, hc, leader+rpc.JobRoute(rpc.PathJobCreate, job), fmt.Sprintf("%s/4", trainer), rpc.JobRequest{}, nil)
	writeAs(t, hc, leader+rpc.JobRoute(rpc.PathJobDelete, job), fmt.Sprintf("%s/5", trainer), rpc.JobRequest{}, nil)
	writeAs(t, hc, leader+rpc.JobRoute(rpc.PathJobCreate, job), uuid.NewString()+"/1", rpc.JobRequest{}, nil)

	start := time.Now()
	flood(t, ctx, hc, leader, floodClients)
	t.Logf("flood: %d writes under fresh client ids in %v", floodClients, time.Since(start).Round(time.Millisecond))

	var casRetry rpc.KVCompareAndSetResponse
	writeAs(t, hc, leader+rpc.PathKVCompareAndSet, fmt.Sprintf("%s/2", trainer), casReq, &casRetry)
	if !casRetry.Swapped || casRetry.Version != cas.Version || string(casRetry.Value) != "round 1" {
		t.Errorf("retried compare-and-set after the flood answered %+v, want swapped at version %d as first answered", casRetry, cas.Version)
	}
	var taskRetry rpc.GetTaskResponse
	writeAs(t, hc, leader+rpc.PathTaskGet, fmt.Sprintf("%s/3", trainer), rpc.GetTaskRequest{Pass: 0}, &taskRetry)
	if taskRetry.Task.Meta != task.Task.Meta {
		t.Errorf("retried GetTask after the flood leased %+v, want the first answer's %+v", taskRetry.Task.Meta, task.Task.Meta)
	}
	writeAs(t, hc, leader+rpc.JobRoute(rpc.PathJobDelete, job), fmt.Sprintf("%s/5", trainer), rpc.JobRequest{}, nil)
	var info rpc.Job
	if err := readJSON(hc, leader+rpc.JobRoute(rpc.PathJob, job), &info); err != nil {
		t.Errorf("job %q after a retried delete: %v; the retry deleted the job created again since", job, err)
	}
	var cl rpc.ClusterResponse
	if err := readJSON(hc, leader+rpc.PathCluster, &cl); err != nil {
		t.Fatal(err)
	}
	if cl.FSM.Pending != 1 {
		t.Errorf("%d tasks pending after the retried GetTask, want 1", cl.FSM.Pending)
	}
	if cl.FSM.DedupClients < floodClients+1 {
		t.Errorf("%d clients held, want the flood's %d and the trainer", cl.FSM.DedupClients, floodClients)
	}
	c.Converged(30 * time.Second)
}

// flood writes n compare-and-sets that do not swap, each under a fresh
// client id, from parallel connections.
func flood(t *testing.T, ctx context.Context, hc *http.Client, base string, n int) {
	t.Helper()
	body, _ := json.Marshal(rpc.KVCompareAndSetRequest{Key: "flood", Version: 1 << 40, Value: []byte("x")})
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := floodWrite(ctx, hc, base+rpc.PathKVCompareAndSet, uuid.NewString()+"/1", body); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("flood: %v", err)
	default:
	}
}

// writeAs sends a write with request id reqID and decodes its 2xx answer into
// out, when not nil; any other answer fails the test.
func writeAs(t *testing.T, hc *http.Client, url, reqID string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(rpc.HeaderRequestID, reqID)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s (%s): %s: %s", url, reqID, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
	}
}

// floodWrite sends one write and fails unless it is answered 2xx.
func floodWrite(ctx context.Context, hc *http.Client, url, reqID string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(rpc.HeaderRequestID, reqID)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s (%s): %s: %s", url, reqID, resp.Status, b)
	}
	return nil
}

// readJSON reads a 200 answer of a GET into out.
func readJSON(hc *http.Client, url string, out any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}
