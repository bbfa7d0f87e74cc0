package raftnode

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
)

// TestUploadStopsOnceADatasetIsSet: an upload in many parts that loses
// the race to another SetDataset stops proposing parts once the leader's
// FSM has a dataset, answers Ignored and leaves nothing staged.
func TestUploadStopsOnceADatasetIsSet(t *testing.T) {
	c := newTestCluster(t, 3)
	for _, n := range c.nodes {
		n.cfg.MaxEntryBytes = 1 << 10
	}
	leader := c.leader()
	big := dataset(20000)
	parts := len(fsm.SplitChunks(big, 1<<10))
	if parts < 100 {
		t.Fatalf("want many parts, got %d", parts)
	}
	before := leader.Status().LastIndex

	type outcome struct {
		r   *fsm.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := leader.SetDataset(context.Background(), fsm.DefaultJob, fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), nil, big)
		done <- outcome{r, err}
	}()
	// Once the big upload is staging, a small dataset wins in one entry.
	waitFor(t, "the upload to start", func() bool { return leader.FSM().Stats(fsm.DefaultJob).Uploads == 1 })
	small, err := leader.SetDataset(context.Background(), fsm.DefaultJob, fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), nil, dataset(10))
	if err != nil || small.Code != fsm.CodeOK || small.Ignored {
		t.Fatalf("small dataset: %+v, %v", small, err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the big upload did not return")
	}
	if o.err != nil || o.r.Code != fsm.CodeOK || !o.r.Ignored {
		t.Fatalf("big upload: %+v, %v; want Ignored", o.r, o.err)
	}
	st := leader.FSM().Stats(fsm.DefaultJob)
	if st.Chunks != 10 || st.Uploads != 0 {
		t.Fatalf("stats %+v, want the small dataset and nothing staged", st)
	}
	// Every part after the small dataset applied would have been ignored;
	// the upload sent a few at most, not all of them.
	if grew := leader.Status().LastIndex - before; grew > uint64(parts/2) {
		t.Fatalf("the log grew by %d entries; the losing upload went on after the dataset was set (%d parts)", grew, parts)
	}
}

// TestUploadOfANamedJobIgnoresOtherJobsDatasets: an upload in many parts
// for a named job goes on to its commit while the default job has a
// dataset; only the job's own dataset stops an upload.
func TestUploadOfANamedJobIgnoresOtherJobsDatasets(t *testing.T) {
	c := newTestCluster(t, 3)
	for _, n := range c.nodes {
		n.cfg.MaxEntryBytes = 1 << 10
	}
	leader := c.leader()
	ctx := context.Background()
	if r, err := leader.SetDataset(ctx, fsm.DefaultJob, fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), nil, dataset(10)); err != nil || r.Code != fsm.CodeOK {
		t.Fatalf("default job's dataset: %+v, %v", r, err)
	}
	big := dataset(2000)
	if parts := len(fsm.SplitChunks(big, 1<<10)); parts < 3 {
		t.Fatalf("want several parts, got %d", parts)
	}
	r, err := leader.SetDataset(ctx, "job-a", fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), nil, big)
	if err != nil || r.Code != fsm.CodeOK || r.Ignored {
		t.Fatalf("job-a's upload: %+v, %v; want it installed", r, err)
	}
	if st := leader.FSM().Stats("job-a"); st.Chunks != len(big) || st.Uploads != 0 {
		t.Fatalf("job-a: %+v, want %d chunks and nothing staged", st, len(big))
	}
}

// TestUploadStopsAtARejectedPart: a part refused for a limit, among the
// parts the leader keeps proposed together, is the upload's answer; no
// commit follows, and the parts proposed after it stage nothing.
func TestUploadStopsAtARejectedPart(t *testing.T) {
	c := newTestCluster(t, 3)
	for _, n := range c.nodes {
		n.cfg.MaxEntryBytes = 1 << 10
	}
	leader := c.leader()
	ctx := context.Background()
	if r, err := leader.Apply(ctx, &fsm.SetLimits{Limits: fsm.Limits{MaxJobChunks: 1000}}); err != nil || r.Code != fsm.CodeOK {
		t.Fatalf("SetLimits: %+v, %v", r, err)
	}
	big := dataset(5000)
	if parts := len(fsm.SplitChunks(big, 1<<10)); parts < 4*partsInFlight {
		t.Fatalf("want many parts, got %d", parts)
	}
	r, err := leader.SetDataset(ctx, fsm.DefaultJob, fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), nil, big)
	if err != nil || r.Code != fsm.CodeLimit {
		t.Fatalf("SetDataset past max_job_chunks: %+v, %v; want limit_exceeded", r, err)
	}
	c.converged()
	for _, n := range c.nodes {
		st := n.FSM().Stats(fsm.DefaultJob)
		if st.HasDataset || st.Uploads != 1 || st.Chunks != 0 {
			t.Fatalf("%s: %+v, want no dataset and the one upload staged", n.ID(), st)
		}
	}
}
