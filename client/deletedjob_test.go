package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// nextRecordErr calls NextRecord until it returns an error, within a
// generous deadline, and returns the error.
func nextRecordErr(t *testing.T, c *client.Client) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := c.NextRecord(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("NextRecord returned no error within 30s")
		return nil
	}
}

// TestReaderOfADeletedJob: a trainer reading a job that is deleted gets
// ErrUnknownJob from NextRecord, once the records it already read are
// delivered, rather than wait for a dataset for ever; so does every later
// pass it starts, and GetTask. A trainer that starts before its job
// exists still waits for the dataset.
func TestReaderOfADeletedJob(t *testing.T) {
	path := writeRecords(t, 40, 4)
	var requests counter
	ts := startServer(t, apitest.NewLocal(), requests.wrap)
	at := client.WithAddr(ts.URL)
	op := newClient(t, at)

	// A trainer that comes first waits for its job.
	early := newClient(t, at, client.WithJob("j"), client.WithBuffer(1))
	early.StartGetRecords(0)
	waitFor(t, "the early trainer to ask twice", 10*time.Second, func() bool {
		return requests.get(rpc.JobPath("j", rpc.PathTaskGet)) >= 2
	})
	if _, err := newClient(t, at, client.WithJob("j")).SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := early.NextRecord(); err != nil {
		t.Fatalf("the trainer that waited for its job: %v", err)
	}

	if err := op.DeleteJob("j"); err != nil {
		t.Fatal(err)
	}
	if err := nextRecordErr(t, early); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("NextRecord after the job was deleted: %v, want ErrUnknownJob", err)
	}
	early.StartGetRecords(1)
	if err := nextRecordErr(t, early); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("NextRecord of a pass started after the job was deleted: %v, want ErrUnknownJob", err)
	}
	if _, err := early.GetTask(1); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("GetTask after the job was deleted: %v, want ErrUnknownJob", err)
	}
	// A new trainer cannot tell the deleted job from one not created yet.
	if _, err := newClient(t, at, client.WithJob("j")).GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("GetTask of a new client: %v, want ErrNoDataset", err)
	}
}

// TestReaderOfAJobCreatedAgain: when the job a trainer reads is deleted
// and created again with a dataset before the trainer asks for its next
// task, the trainer gets ErrUnknownJob. Its GetTask names the job's
// number, so the cluster leases it nothing of the new job; a cluster
// below protocol level 2, which does not check the number (here a proxy
// drops it), leases a task of the new job, whose number tells the client,
// and the client hands the task back at once.
func TestReaderOfAJobCreatedAgain(t *testing.T) {
	for _, checked := range []bool{true, false} {
		t.Run(map[bool]string{true: "checked by the cluster", false: "below protocol level 2"}[checked], func(t *testing.T) {
			path := writeRecords(t, 40, 4)
			local := apitest.NewLocal()
			ts := startServer(t, local, func(h http.Handler) http.Handler {
				if checked {
					return h
				}
				return dropJobNumber(t, h)
			})
			at := client.WithAddr(ts.URL)
			params := client.DatasetParams{ChunksPerTask: 2}
			if _, err := newClient(t, at, client.WithJob("j")).SetDatasetWithParams([]string{path}, params); err != nil {
				t.Fatal(err)
			}
			reader := newClient(t, at, client.WithJob("j"), client.WithBuffer(1))
			reader.StartGetRecords(0)
			if _, err := reader.NextRecord(); err != nil {
				t.Fatal(err)
			}
			// The reader holds its first task, blocked on a full buffer.
			if err := newClient(t, at).DeleteJob("j"); err != nil {
				t.Fatal(err)
			}
			if _, err := newClient(t, at, client.WithJob("j")).SetDatasetWithParams([]string{path}, params); err != nil {
				t.Fatal(err)
			}
			if err := nextRecordErr(t, reader); !errors.Is(err, client.ErrUnknownJob) {
				t.Fatalf("NextRecord once the job was created again: %v, want ErrUnknownJob", err)
			}
			waitFor(t, "no task of the new job leased to the reader", 10*time.Second, func() bool {
				return local.FSM().Stats("j").Pending == 0
			})
			if st := local.FSM().Stats("j"); checked && st.Todo != st.Tasks {
				t.Fatalf("the new job after the reader's GetTask: %+v, want every task to do", st)
			}
		})
	}
}

// dropJobNumber serves h with the job_number of GetTask requests dropped,
// as a cluster that does not know it.
func dropJobNumber(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == rpc.PathTaskGet || strings.HasSuffix(r.URL.Path, strings.TrimPrefix(rpc.PathTaskGet, "/v1")) {
			var in rpc.GetTaskRequest
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				t.Errorf("GetTask body: %v", err)
			}
			b, _ := json.Marshal(rpc.GetTaskRequest{Pass: in.Pass})
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		h.ServeHTTP(w, r)
	})
}
