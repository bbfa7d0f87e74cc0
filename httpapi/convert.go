package httpapi

import (
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// The state machine's types and the wire contract's are kept apart, so that
// clients need not link the state machine; these functions translate.

// FSMTime returns FSM time t (unix nanoseconds) as a wire time, or the zero
// time for 0.
func FSMTime(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t).UTC()
}

// ChunkFromFSM returns a chunk's wire form.
func ChunkFromFSM(c fsm.Chunk) rpc.Chunk {
	return rpc.Chunk{Path: c.Path, Offset: c.Offset, Records: c.Records}
}

// ChunkToFSM returns a wire chunk's FSM form.
func ChunkToFSM(c rpc.Chunk) fsm.Chunk {
	return fsm.Chunk{Path: c.Path, Offset: c.Offset, Records: c.Records}
}

// TaskMetaToFSM returns a wire task meta's FSM form.
func TaskMetaToFSM(m rpc.TaskMeta) fsm.TaskMeta { return fsm.TaskMeta{ID: m.ID, Epoch: m.Epoch} }

// TaskMetaFromFSM returns a task meta's wire form.
func TaskMetaFromFSM(m fsm.TaskMeta) rpc.TaskMeta { return rpc.TaskMeta{ID: m.ID, Epoch: m.Epoch} }

// TaskFromFSM returns the wire form of a leased task.
func TaskFromFSM(t *fsm.Task) rpc.Task {
	out := rpc.Task{Meta: TaskMetaFromFSM(t.Meta), Chunks: make([]rpc.Chunk, len(t.Chunks)), Pass: t.Pass,
		Lease: rpc.Duration(t.Lease), Session: t.Session, Skip: t.Skip, Seed: t.Seed, Source: t.Source}
	for i, c := range t.Chunks {
		out.Chunks[i] = ChunkFromFSM(c)
	}
	return out
}

// FinishOutcomeFromFSM returns the wire form of how the finish a GetTask
// carried went: an empty code when it counted; nil for none.
func FinishOutcomeFromFSM(o *fsm.FinishOutcome) *rpc.FinishOutcome {
	if o == nil {
		return nil
	}
	out := &rpc.FinishOutcome{Ignored: o.Ignored}
	if o.Code != fsm.CodeOK {
		out.Code = o.Code.String()
	}
	return out
}

// StatsFromFSM returns the wire form of the state summary.
func StatsFromFSM(s fsm.Stats) rpc.Stats {
	return rpc.Stats{
		Clock: FSMTime(s.Clock), HasDataset: s.HasDataset, Pass: s.Pass, Chunks: s.Chunks, Tasks: s.Tasks,
		Todo: s.Todo, Pending: s.Pending, Held: s.Held, Done: s.Done, Failed: s.Failed,
		Params:  DatasetParamsFromFSM(s.Params),
		Uploads: s.Uploads, SaveHolder: s.SaveHolder, SaveDeadline: FSMTime(s.SaveDeadline),
		Groups: s.Groups, Nodes: s.Nodes, DedupClients: s.DedupClients, AppliedIndex: s.AppliedIndex,
		Jobs: s.Jobs, StateBytes: s.StateBytes,
	}
}

// JobFromFSM returns the wire form of a job's summary.
func JobFromFSM(j fsm.JobInfo) rpc.Job {
	return rpc.Job{
		Name: j.Name, CreatedAt: FSMTime(j.CreatedAt), LastActivity: FSMTime(j.LastActivity), HasDataset: j.HasDataset,
		Pass: j.Pass, Tasks: j.Tasks, Todo: j.Todo, Pending: j.Pending, Held: j.Held, Done: j.Done, Failed: j.Failed,
		Uploads: j.Uploads, Groups: j.Groups, KVKeys: j.KVKeys, SaveHolder: j.SaveHolder, SaveDeadline: FSMTime(j.SaveDeadline),
		Bytes: j.Bytes, CollectAt: FSMTime(j.CollectAt),
	}
}

// WithDataset adds the dataset d of a job to its summary j: its counts,
// settings and patterns, and its paths.
func WithDataset(j rpc.Job, d fsm.DatasetInfo) rpc.Job {
	p := DatasetParamsFromFSM(d.Params)
	j.Files, j.Chunks, j.Params, j.Patterns, j.Paths = d.Files, d.Chunks, &p, d.Patterns, d.Paths
	return j
}

// WithMixture adds the sources of a mixture job to its summary j, from
// the job's state summary st: none for a dataset of one source.
func WithMixture(j rpc.Job, st fsm.Stats) rpc.Job {
	j.Sources, j.Schedule, j.Records = SourcesFromFSM(st.Sources), ScheduleFromFSM(st.Schedule), st.Records
	return j
}

// WeightFromFSM returns a weight in millionths (fsm.WeightUnit) as the
// wire's number, 1.0 being fsm.WeightUnit.
func WeightFromFSM(units uint32) float64 { return float64(units) / fsm.WeightUnit }

// SourcesFromFSM returns the wire form of a mixture's sources; nil for
// none.
func SourcesFromFSM(ss []fsm.SourceStats) []rpc.SourceStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]rpc.SourceStatus, len(ss))
	for k, s := range ss {
		out[k] = rpc.SourceStatus{
			Name: s.Name, Weight: WeightFromFSM(s.Weight), Pass: s.Pass, Tasks: s.Tasks,
			Todo: s.Todo, Pending: s.Pending, Done: s.Done, Failed: s.Failed,
			Records: s.Records, Finished: s.Finished, Globs: s.Patterns,
		}
	}
	return out
}

// ScheduleFromFSM returns the wire form of a weight schedule; nil for
// none.
func ScheduleFromFSM(steps []fsm.WeightStep) []rpc.WeightStep {
	if len(steps) == 0 {
		return nil
	}
	out := make([]rpc.WeightStep, len(steps))
	for k, s := range steps {
		ws := make(map[string]float64, len(s.Weights))
		for _, w := range s.Weights {
			ws[w.Name] = WeightFromFSM(w.Weight)
		}
		out[k] = rpc.WeightStep{AtRecords: s.AtRecords, Weights: ws}
	}
	return out
}

// DatasetParamsFromFSM returns the wire form of a dataset's settings.
func DatasetParamsFromFSM(p fsm.DatasetParams) rpc.DatasetParams {
	return rpc.DatasetParams{ChunksPerTask: p.ChunksPerTask, TaskTimeout: rpc.Duration(p.TaskTimeout), FailureMax: p.FailureMax,
		Strict: p.Strict, Shuffle: p.Shuffle, Seed: p.Seed}
}

// JobsFromFSM returns the wire form of the jobs' summaries.
func JobsFromFSM(js []fsm.JobInfo) []rpc.Job {
	out := make([]rpc.Job, len(js))
	for i, j := range js {
		out[i] = JobFromFSM(j)
	}
	return out
}

// LimitsFromFSM returns the wire form of the limits in effect.
func LimitsFromFSM(l fsm.Limits) rpc.Limits {
	return rpc.Limits{
		MaxJobs: l.MaxJobs, MaxJobTasks: l.MaxJobTasks, MaxJobChunks: l.MaxJobChunks, MaxJobGroups: l.MaxJobGroups,
		MaxJobGroupBytes: l.MaxJobGroupBytes, MaxStateBytes: l.MaxStateBytes, JobTTL: rpc.Duration(l.JobTTL),
		MaxJobKVKeys: l.MaxJobKVKeys, MaxKVValueBytes: l.MaxKVValueBytes,
	}
}

// GroupsFromFSM returns the wire form of allgather groups.
func GroupsFromFSM(gs []fsm.GroupInfo) []rpc.Group {
	out := make([]rpc.Group, 0, len(gs))
	for _, g := range gs {
		w := rpc.Group{
			ID: g.ID, NumPeers: g.NumPeers, Status: g.Status, Timeout: rpc.Duration(g.Timeout),
			Deadline: FSMTime(g.Deadline), FailOnTimeout: g.FailOnTimeout, Overdue: g.Overdue,
		}
		for _, m := range g.Members {
			w.Members = append(w.Members, rpc.GroupMember{ID: m.ID, Generation: m.Generation, DataLen: m.DataLen, Left: m.Left})
		}
		out = append(out, w)
	}
	return out
}
