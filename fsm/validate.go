package fsm

import (
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
)

// validate checks a command against the limits, independent of the state:
// the header's, then its type's (its validator in commands). A command
// that fails is rejected before anything changes.
func validate(c Command) error {
	h := c.Hdr()
	if now := h.Now; now < 0 || now > maxNow {
		return invalidf("timestamp %d out of range [0, %d]", now, maxNow)
	}
	spec := lookup(c.Type())
	if spec == nil {
		return invalidf("unknown command type %v", c.Type())
	}
	switch {
	case !spec.jobScoped && h.Job != "":
		return invalidf("%v is cluster-wide, but names job %q", c.Type(), truncate(h.Job))
	case h.Job != "":
		if err := ValidateJobName(h.Job); err != nil {
			return err
		}
	}
	return spec.validate(c)
}

// The validators of the command types, one each, named in their rows of
// commands.

func (c *SetDataset) validate() error {
	if len(c.Chunks) == 0 {
		return invalidf("dataset has no chunks")
	}
	if err := validateParams(c.Params); err != nil {
		return err
	}
	if err := validatePatterns(c.Patterns); err != nil {
		return err
	}
	if len(c.Params.Sources) > 0 && len(c.Patterns) > 0 {
		return invalidf("a mixture's patterns are its sources'")
	}
	return validateChunks(c.Chunks)
}

func (c *DatasetPart) validate() error {
	if err := validateID("upload id", c.UploadID); err != nil {
		return err
	}
	return validateChunks(c.Chunks)
}

func (c *DatasetCommit) validate() error {
	if err := validateID("upload id", c.UploadID); err != nil {
		return err
	}
	if err := validatePatterns(c.Patterns); err != nil {
		return err
	}
	if len(c.Params.Sources) > 0 && len(c.Patterns) > 0 {
		return invalidf("a mixture's patterns are its sources'")
	}
	return validateParams(c.Params)
}

func (c *GetTask) validate() error {
	if c.Pass < 0 {
		return invalidf("negative pass id %d", c.Pass)
	}
	if c.Count < 0 || c.Count > MaxTasksPerGet {
		return invalidf("count %d: a GetTask leases 1 to %d tasks", c.Count, MaxTasksPerGet)
	}
	if len(c.MoreFinished) > 0 && c.Finished.ID == 0 {
		return invalidf("more finished tasks without a finished task")
	}
	if len(c.MoreFinished)+1 > MaxTasksPerGet {
		return invalidf("%d finished tasks: a GetTask carries at most %d", len(c.MoreFinished)+1, MaxTasksPerGet)
	}
	if c.Finished.ID == 0 {
		return nil
	}
	seen := make([]int, 0, len(c.MoreFinished)+1)
	for _, m := range append([]TaskMeta{c.Finished}, c.MoreFinished...) {
		if err := validateMeta(m); err != nil {
			return err
		}
		if slices.Contains(seen, m.ID) {
			return invalidf("task %d is finished twice in one GetTask", m.ID)
		}
		seen = append(seen, m.ID)
	}
	return nil
}

func (c *TaskFinished) validate() error { return validateMeta(c.Meta) }
func (c *TaskFailed) validate() error   { return validateMeta(c.Meta) }
func (c *RenewLease) validate() error {
	if len(c.More)+1 > MaxTasksPerGet {
		return invalidf("%d leases: a RenewLease renews at most %d", len(c.More)+1, MaxTasksPerGet)
	}
	seen := make([]int, 0, len(c.More)+1)
	for _, m := range append([]TaskMeta{c.Meta}, c.More...) {
		if err := validateMeta(m); err != nil {
			return err
		}
		if slices.Contains(seen, m.ID) {
			return invalidf("task %d is renewed twice in one RenewLease", m.ID)
		}
		seen = append(seen, m.ID)
	}
	return nil
}

// validate accepts every Tick: it carries nothing but the header.
func (c *Tick) validate() error { return nil }

func (c *RequestSaveModel) validate() error {
	if err := validateID("trainer id", c.TrainerID); err != nil {
		return err
	}
	return validateDuration("block duration", c.BlockDur, 1, MaxBlockDur)
}

func (c *Join) validate() error {
	if err := validateID("group id", c.Group); err != nil {
		return err
	}
	if c.Member == uuid.Nil {
		return invalidf("member id is the nil UUID")
	}
	if c.NumPeers < 1 || c.NumPeers > MaxPeers {
		return invalidf("numPeers %d out of range [1, %d]", c.NumPeers, MaxPeers)
	}
	if len(c.Data) > MaxMemberData {
		return invalidf("member data of %d bytes exceeds %d", len(c.Data), MaxMemberData)
	}
	return validateDuration("allgather timeout", c.Timeout, 0, MaxGroupTimeout)
}

func (c *Leave) validate() error { return validateID("group id", c.Group) }

func (c *RegisterNode) validate() error {
	if err := validateID("node id", c.Node.ID); err != nil {
		return err
	}
	if len(c.Node.RaftAddr) > MaxIDLen || len(c.Node.APIAddr) > MaxIDLen {
		return invalidf("node address longer than %d bytes", MaxIDLen)
	}
	if len(c.Node.Version) > MaxIDLen {
		return invalidf("node version longer than %d bytes", MaxIDLen)
	}
	return nil
}

func (c *RemoveNode) validate() error  { return validateID("node id", c.ID) }
func (c *LeaderGrace) validate() error { return validateDuration("grace", c.Grace, 0, MaxGrace) }

// validate accepts every CreateJob: the header names the job.
func (c *CreateJob) validate() error { return nil }

// validate refuses a DeleteJob that names no job, so that deleting
// DefaultJob is always asked for by name.
func (c *DeleteJob) validate() error {
	if c.Job == "" {
		return invalidf("DeleteJob names no job; name %q to delete the default job", DefaultJob)
	}
	return nil
}

func (c *SetLimits) validate() error { return c.Limits.validate() }

// validate checks the key and the value's size against the fixed
// ceiling; the value's replicated limit (Limits.MaxKVValueBytes) is checked
// in apply.
func (c *KVCompareAndSet) validate() error {
	if err := ValidateKVKey(c.Key); err != nil {
		return err
	}
	if len(c.Value) > MaxKVValueBytesCeiling {
		return invalidf("a value of %d bytes exceeds %d", len(c.Value), MaxKVValueBytesCeiling)
	}
	return nil
}

func (c *KVDelete) validate() error { return ValidateKVKey(c.Key) }

func (c *KVDeletePrefix) validate() error { return ValidateKVPrefix(c.Prefix) }

func (c *KVAdd) validate() error { return ValidateKVKey(c.Key) }

// validate checks the keys, which must be distinct, and the values'
// size together against the fixed ceiling; the replicated limits are
// checked in apply.
func (c *KVMultiSet) validate() error {
	if len(c.Pairs) == 0 || len(c.Pairs) > MaxJobKVKeysCeiling {
		return invalidf("a multi-set of %d keys: it sets 1 to %d", len(c.Pairs), MaxJobKVKeysCeiling)
	}
	seen := make(map[string]bool, len(c.Pairs))
	total := 0
	for _, p := range c.Pairs {
		if err := ValidateKVKey(p.Key); err != nil {
			return err
		}
		if seen[p.Key] {
			return invalidf("key %q is set twice in one multi-set", p.Key)
		}
		seen[p.Key] = true
		total += len(p.Value)
	}
	if total > MaxKVValueBytesCeiling {
		return invalidf("values of %d bytes together exceed %d", total, MaxKVValueBytesCeiling)
	}
	return nil
}

func (c *KVAppend) validate() error {
	if err := ValidateKVKey(c.Key); err != nil {
		return err
	}
	if len(c.Value) > MaxKVValueBytesCeiling {
		return invalidf("a value of %d bytes exceeds %d", len(c.Value), MaxKVValueBytesCeiling)
	}
	return nil
}

func (c *KVCompareValue) validate() error {
	if err := ValidateKVKey(c.Key); err != nil {
		return err
	}
	if n := max(len(c.Expected), len(c.Desired)); n > MaxKVValueBytesCeiling {
		return invalidf("a value of %d bytes exceeds %d", n, MaxKVValueBytesCeiling)
	}
	return nil
}

func validateID(what, id string) error {
	if id == "" {
		return invalidf("%s is empty", what)
	}
	if len(id) > MaxIDLen {
		return invalidf("%s longer than %d bytes", what, MaxIDLen)
	}
	return nil
}

func validateDuration(what string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return invalidf("%s %v out of range [%v, %v]", what, d, lo, hi)
	}
	return nil
}

func validateParams(p DatasetParams) error {
	if p.ChunksPerTask < 1 || p.ChunksPerTask > MaxChunks {
		return invalidf("chunksPerTask %d out of range [1, %d]", p.ChunksPerTask, MaxChunks)
	}
	if p.FailureMax < 0 || p.FailureMax > MaxFailureMax {
		return invalidf("failureMax %d out of range [0, %d]", p.FailureMax, MaxFailureMax)
	}
	if err := validateSources(p.Sources); err != nil {
		return err
	}
	return validateDuration("task timeout", p.TaskTimeout, time.Millisecond, MaxTaskTimeout)
}

// validatePatterns checks a dataset's patterns: at most MaxPatterns, each
// of 1 to MaxPathLen bytes, at most MaxPatternBytes together.
func validatePatterns(patterns []string) error {
	if len(patterns) > MaxPatterns {
		return invalidf("%d patterns exceed %d", len(patterns), MaxPatterns)
	}
	total := 0
	for i, p := range patterns {
		if p == "" || len(p) > MaxPathLen {
			return invalidf("pattern %d: length %d out of range [1, %d]", i, len(p), MaxPathLen)
		}
		total += len(p)
	}
	if total > MaxPatternBytes {
		return invalidf("patterns of %d bytes together exceed %d", total, MaxPatternBytes)
	}
	return nil
}

func validateChunks(chunks []Chunk) error {
	if len(chunks) > MaxChunks {
		return invalidf("%d chunks exceed %d", len(chunks), MaxChunks)
	}
	for i, c := range chunks {
		if c.Path == "" || len(c.Path) > MaxPathLen {
			return invalidf("chunk %d: path length %d out of range [1, %d]", i, len(c.Path), MaxPathLen)
		}
		if c.Offset < 0 {
			return invalidf("chunk %d: negative offset %d", i, c.Offset)
		}
	}
	return nil
}

func validateMeta(m TaskMeta) error {
	if m.ID < 1 || m.ID > math.MaxInt32 {
		return invalidf("task id %d out of range", m.ID)
	}
	if m.Epoch < 0 || m.Epoch > MaxEpoch {
		return invalidf("task epoch %d out of range", m.Epoch)
	}
	return nil
}

// metaOf returns the task a task report names: TaskFinished, TaskFailed
// and RenewLease.
func metaOf(c Command) (TaskMeta, bool) {
	switch c := c.(type) {
	case *TaskFinished:
		return c.Meta, true
	case *TaskFailed:
		return c.Meta, true
	case *RenewLease:
		return c.Meta, true
	case *GetTask:
		return c.Finished, c.Finished.ID != 0
	}
	return TaskMeta{}, false
}
