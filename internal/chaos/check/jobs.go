package check

import (
	"fmt"
	"slices"
	"sort"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// Jobs returns the jobs of ops (see [history.JobOf]), sorted.
func Jobs(ops []history.Op) []string {
	var jobs []string
	for _, op := range ops {
		if j := history.JobOf(op); !slices.Contains(jobs, j) {
			jobs = append(jobs, j)
		}
	}
	sort.Strings(jobs)
	return jobs
}

// PerJob runs All on the operations of each job separately, with the
// Config that cfg returns for the job, and names the job in front of each
// violation. Every job has its own dataset, passes, save-model lease and
// groups, so each job's history must pass on its own: an operation of one
// job that took effect in another shows as a violation of either. The op
// numbers in a violation count the operations of that job only, in the
// order of the history.
func PerJob(ops []history.Op, cfg func(job string) Config) []error {
	byJob := history.ByJob(ops)
	var errs []error
	for _, job := range Jobs(ops) {
		for _, err := range All(byJob[job], cfg(job)) {
			errs = append(errs, fmt.Errorf("job %q: %w", job, err))
		}
	}
	return errs
}

// NoCrossing checks that the jobs of a history never cross. datasets maps
// each job to the files of its dataset; no file may be in two jobs.
//
//   - A task leased in a job names only files of that job's dataset, and a
//     task id names the same files every time it is leased in the job.
//   - A save-model denial in a job is explained by the job itself: some
//     other trainer of the same job was granted the lease, or may have been
//     (an unknown outcome), before the denial (in FSM time when both are
//     known, else invoked before the denial returned). A grant in another
//     job must not deny anyone.
//   - A successful allgather watch in a job is of a member that joined the
//     group in that job, and every entry of its result is the data of a
//     join of the group in that job, never of a join in another job.
//
// A job without an entry in datasets (a history recorded before jobs,
// whose tasks name no files) has its tasks left unchecked; a task of a job
// with one must name files.
func NoCrossing(ops []history.Op, datasets map[string][]string) error {
	v := &violations{name: "jobs never cross"}
	owner := map[string]string{} // file -> job
	for job, files := range datasets {
		for _, f := range files {
			if o, ok := owner[f]; ok && o != job {
				v.add("file %s is in the datasets of jobs %q and %q", f, o, job)
			}
			owner[f] = job
		}
	}

	type jobID struct {
		job string
		id  int
	}
	type jobGroup struct{ job, group string }
	taskFiles := map[jobID]int{}   // the first GetTask that leased the id in the job
	joinData := map[string][]int{} // data -> joins with that data, any job
	joined := map[jobGroup][]int{} // the joins of a group in a job
	saves := map[string][]int{}    // job -> save-model grants, known or possible
	for i, op := range ops {
		job := history.JobOf(op)
		switch op.Kind {
		case history.GetTask, history.FinishAndGet:
			if g, _ := getView(op); !succeeded(g) {
				continue
			}
			if len(op.Chunks) == 0 {
				if _, ok := datasets[job]; ok {
					v.add("%s: the leased task names no chunk files", describe(i, op))
				}
				continue
			}
			for _, f := range op.Chunks {
				switch o, ok := owner[f]; {
				case !ok:
					v.add("%s: chunk file %s is in no job's dataset", describe(i, op), f)
				case o != job:
					v.add("%s: leased a task of job %q's dataset (chunk file %s)", describe(i, op), o, f)
				}
			}
			k := jobID{job, op.Task.ID}
			if j, ok := taskFiles[k]; !ok {
				taskFiles[k] = i
			} else if !slices.Equal(ops[j].Chunks, op.Chunks) {
				v.add("task %d of job %q names different files: %q in %s, %q in %s",
					op.Task.ID, job, ops[j].Chunks, describe(j, ops[j]), op.Chunks, describe(i, op))
			}
		case history.SaveModel:
			if (succeeded(op) && op.Granted) || unknown(op) {
				saves[job] = append(saves[job], i)
			}
		case history.Join:
			if succeeded(op) || unknown(op) {
				joinData[op.Data] = append(joinData[op.Data], i)
				k := jobGroup{job, op.Group}
				joined[k] = append(joined[k], i)
			}
		}
	}

	// mayPrecede reports whether grant g may have been applied before
	// denial d.
	mayPrecede := func(g, d history.Op) bool {
		if succeeded(g) && g.AppliedAt != 0 && d.AppliedAt != 0 {
			return g.AppliedAt < d.AppliedAt
		}
		return g.Invoke < d.Return
	}
	explains := func(job string, d history.Op) (int, bool) {
		for _, gi := range saves[job] {
			if g := ops[gi]; g.Trainer != d.Trainer && mayPrecede(g, d) {
				return gi, true
			}
		}
		return 0, false
	}
	jobs := make([]string, 0, len(saves))
	for job := range saves {
		jobs = append(jobs, job)
	}
	sort.Strings(jobs)

	for i, op := range ops {
		job := history.JobOf(op)
		switch op.Kind {
		case history.SaveModel:
			if !succeeded(op) || op.Granted {
				continue
			}
			if _, ok := explains(job, op); ok {
				continue
			}
			msg := fmt.Sprintf("%s: denied, but no other trainer of job %q was or may have been granted the lease before", describe(i, op), job)
			for _, other := range jobs {
				if other == job {
					continue
				}
				if gi, ok := explains(other, op); ok {
					msg += fmt.Sprintf("; job %q's %s was", other, describe(gi, ops[gi]))
					break
				}
			}
			v.add("%s", msg)
		case history.Watch:
			if !succeeded(op) {
				continue
			}
			k := jobGroup{job, op.Group}
			if !slices.ContainsFunc(joined[k], func(ji int) bool { return ops[ji].Member == op.Member }) {
				v.add("%s: the member never joined group %q in job %q", describe(i, op), op.Group, job)
			}
			for r, d := range op.Result {
				js := joinData[d]
				if slices.ContainsFunc(js, func(ji int) bool { return history.JobOf(ops[ji]) == job && ops[ji].Group == op.Group }) {
					continue
				}
				if len(js) > 0 && history.JobOf(ops[js[0]]) != job {
					v.add("%s: entry %d, %q, is the data of a join in job %q (%s)", describe(i, op), r, d, history.JobOf(ops[js[0]]), describe(js[0], ops[js[0]]))
				} else {
					v.add("%s: entry %d, %q, is the data of no join of group %q in job %q", describe(i, op), r, d, op.Group, job)
				}
			}
		}
	}
	return v.err()
}
