package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
)

// TestWithJob: clients of two jobs on one cluster get their own datasets
// and save-model leases; a client without WithJob is the default job; a
// deleted job's clients start from nothing.
func TestWithJob(t *testing.T) {
	path := writeRecords(t, 20, 4)
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	a := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-a"))
	b := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-b"))
	def := newClient(t, client.WithAddr(ts.URL))

	if _, err := a.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("job b leased a task of job a's dataset: %v", err)
	}
	if _, err := def.GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("the default job leased a task of job a's dataset: %v", err)
	}
	task, err := a.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.TaskFinished(task.Meta); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{a, b} {
		if ok, err := c.RequestSaveModel("trainer-0", time.Minute); err != nil || !ok {
			t.Fatalf("save-model lease refused in its own job: %v %v", ok, err)
		}
	}
	if st := local.FSM().Stats("job-a"); st.Done != 1 || !st.HasDataset {
		t.Fatalf("job a in the FSM: %+v", st)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.HasDataset || st.SaveHolder != "" {
		t.Fatalf("the default job changed: %+v", st)
	}

	jobs, err := def.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 2 || jobs.Jobs[0].Name != "job-a" || jobs.Jobs[1].Name != "job-b" {
		t.Fatalf("jobs: %+v", jobs.Jobs)
	}
	if err := def.DeleteJob("job-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := def.Job("job-a"); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("deleted job inspected: %v", err)
	}
	if err := def.DeleteJob("job-a"); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("second delete: %v", err)
	}
	// The client that read job a knows it was deleted; a new client
	// cannot tell it from a job not created yet.
	if _, err := a.GetTask(0); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("GetTask of a client that read the deleted job: %v, want ErrUnknownJob", err)
	}
	if _, err := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-a")).GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("a deleted job still dispatches: %v", err)
	}
	if created, err := def.CreateJob("job-a"); err != nil || !created {
		t.Fatalf("re-creating job a: %v %v", created, err)
	}
	if created, err := def.CreateJob("job-a"); err != nil || created {
		t.Fatalf("creating job a twice: %v %v", created, err)
	}
	if _, err := newClient(t, client.WithAddr(ts.URL), client.WithJob("Bad_Name")).GetTask(0); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a bad job name: %v", err)
	}
}
