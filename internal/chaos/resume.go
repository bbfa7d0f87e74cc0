package chaos

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/resume"
)

// Resume schedules (internal/resume) run beside the workload for the whole
// run, each on a job of its own: trainers checkpoint with cursors, are all
// killed at least three times and restart from the last complete
// checkpoint at a random number of trainers and readers, under the run's
// faults. Each must train every record of every pass exactly once.
const (
	// resumeDrivers run schedules at once.
	resumeDrivers = 2
	// resumeFiles and resumeRecords make a schedule's dataset: tasks of
	// a chunk of about three records.
	resumeFiles, resumeRecords = 3, 9
	// resumeSessionTTL outlasts the faults a run holds (3 s at most) and
	// an election: a trainer whose session ends while it lives has
	// trained records that go out again, which only a restore from the
	// checkpoint makes exact.
	resumeSessionTTL = 20 * time.Second
)

// maxFailures never sets a task aside: the hand-backs of killed trainers'
// readers count failures.
var maxFailures = fsm.MaxFailureMax

// ResumeReport is what the run's resume schedules did.
type ResumeReport struct {
	Schedules, Restarts, Torn, Checkpoints int
	Duplicates, Losses                     int
	// Unfinished counts the schedules that the run's end cut short.
	Unfinished int
}

func (r *ResumeReport) add(o ResumeReport) {
	r.Schedules += o.Schedules
	r.Restarts += o.Restarts
	r.Torn += o.Torn
	r.Checkpoints += o.Checkpoints
	r.Duplicates += o.Duplicates
	r.Losses += o.Losses
	r.Unfinished += o.Unfinished
}

// resumeRunner runs resume schedules until its context ends.
type resumeRunner struct {
	addrs []string
	dir   string
	seed  uint64
	logf  func(string, ...any)

	mu         sync.Mutex
	report     ResumeReport
	violations []string
}

// run is one driver: schedules one after the other, job names of their
// own.
func (r *resumeRunner) run(ctx context.Context, driver int) {
	for n := 0; ctx.Err() == nil; n++ {
		job := fmt.Sprintf("resume-%d-%d", driver, n)
		res, err := r.schedule(ctx, job, r.seed+uint64(driver)<<32+uint64(n))
		r.mu.Lock()
		switch {
		case err != nil && ctx.Err() != nil:
			r.report.Unfinished++
		case err != nil:
			r.violations = append(r.violations, fmt.Sprintf("resume schedule %s: %v", job, err))
		default:
			r.report.add(ResumeReport{Schedules: 1, Restarts: res.Restarts, Torn: res.Torn, Checkpoints: res.Checkpoints,
				Duplicates: res.Duplicates, Losses: res.Losses})
			if res.Duplicates != 0 || res.Losses != 0 {
				r.violations = append(r.violations, fmt.Sprintf("exactly once over full restarts: schedule %s: %v", job, res))
			}
		}
		r.mu.Unlock()
	}
}

func (r *resumeRunner) schedule(ctx context.Context, job string, seed uint64) (resume.Result, error) {
	dir, err := os.MkdirTemp(r.dir, job)
	if err != nil {
		return resume.Result{}, err
	}
	defer os.RemoveAll(dir)
	pattern, ids, err := resume.WriteDataset(dir, job, resumeFiles, resumeRecords)
	if err != nil {
		return resume.Result{}, err
	}
	setup, err := client.NewClient(client.WithAddrs(r.addrs...), client.WithJob(job))
	if err != nil {
		return resume.Result{}, err
	}
	defer setup.Close()
	if _, err := setup.SetDatasetWithParamsContext(ctx, []string{pattern}, client.DatasetParams{
		ChunksPerTask: 1, TaskTimeout: 10 * time.Minute, FailureMax: &maxFailures}); err != nil {
		return resume.Result{}, fmt.Errorf("setting the dataset: %w", err)
	}
	res, err := resume.Run(ctx, resume.Config{
		Addrs: r.addrs, Job: job, Records: ids, Passes: 2, Restarts: 3, MaxTrainers: 8, MaxReaders: 2, Seed: seed,
		Options: []client.Option{client.WithSessionTTL(resumeSessionTTL)},
	})
	if err == nil {
		// The job's cursors and state are the schedule's alone.
		if err := setup.DeleteJobContext(ctx, job); err != nil {
			r.logf("resume schedule %s: deleting its job: %v", job, err)
		}
	}
	return res, err
}
