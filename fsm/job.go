package fsm

// jobName returns the job a command addresses: its Header.Job, or
// DefaultJob when that is empty.
func jobName(name string) string {
	if name == "" {
		return DefaultJob
	}
	return name
}

// ValidateJobName checks a job name against the rules of a DNS label: 1 to
// MaxJobNameLen characters, lowercase letters, digits and '-', starting and
// ending with a letter or digit. The error wraps ErrInvalid and states the
// rule.
func ValidateJobName(name string) error {
	const rule = "a job name is 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit"
	if name == "" || len(name) > MaxJobNameLen {
		return invalidf("job name %q: %s", truncate(name), rule)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(name)-1) {
			return invalidf("job name %q: %s", truncate(name), rule)
		}
	}
	return nil
}

// truncate shortens s for a message.
func truncate(s string) string {
	if len(s) > 2*MaxJobNameLen {
		return s[:2*MaxJobNameLen] + "..."
	}
	return s
}

// effectiveLimits returns the limits in effect.
func (s *state) effectiveLimits() Limits { return s.limits.Effective() }

// roomForJob checks that a job named name may be created: MaxJobs and the
// state's size.
func (s *state) roomForJob(name string) error {
	l := s.effectiveLimits()
	if len(s.jobs) >= l.MaxJobs {
		return limitf("max_jobs", int64(l.MaxJobs), "creating job %q would make %d jobs", name, len(s.jobs)+1)
	}
	if total := s.stateBytes + emptyJobBytes(name); total > l.MaxStateBytes {
		return limitf("max_state_bytes", l.MaxStateBytes, "creating job %q would bring the state to %d bytes", name, total)
	}
	return nil
}

// addJob makes j one of the jobs, numbering it.
func (s *state) addJob(j *job) {
	s.jobSeq++
	j.seq = s.jobSeq
	s.jobs[j.name] = j
	s.stateBytes += j.jobBytes
}

// dropJob deletes job j with everything it holds. The watches of its groups
// are woken: with the job gone they answer ErrClosed; those of its
// register's keys find them gone.
func (s *state) dropJob(j *job) {
	for _, id := range sortedKeys(j.groups) {
		j.changedGroup(id)
	}
	j.changedKV("")
	s.stateBytes -= j.jobBytes
	delete(s.jobs, j.name)
}

// exists reports whether j is one of the jobs, rather than the empty job a
// command to an unknown job runs on (dispatch).
func (j *job) exists() bool { return j.cluster.jobs[j.name] == j }

// idleExpired reports whether the job is due for collection: JobTTL is on,
// nothing is leased or gathered, and no command addressed it for JobTTL.
func (j *job) idleExpired() bool {
	d, ok := j.ttlDeadline()
	return ok && d <= j.cluster.clock
}

// ttlDeadline returns when the job is collected if nothing happens before:
// false while JobTTL is off or the job has a task lease out, a save-model
// holder, an allgather group or a kept round that timed out.
func (j *job) ttlDeadline() (int64, bool) {
	ttl := j.cluster.effectiveLimits().JobTTL
	if ttl <= 0 || j.outstanding() != 0 || j.save.holder != "" || len(j.groups) != 0 || len(j.timeouts) != 0 {
		return 0, false
	}
	return j.lastActivity + int64(ttl), true
}

// createJob creates the job (dispatch adds it); an existing job is
// ignored.
func (j *job) createJob(*CreateJob) *Result {
	if j.exists() {
		return &Result{Ignored: true}
	}
	return &Result{}
}

// deleteJob deletes the job with everything it holds; a job created again
// under the same name starts from nothing.
func (j *job) deleteJob(*DeleteJob) *Result {
	if !j.exists() {
		return errResult(ErrUnknownJob)
	}
	j.cluster.dropJob(j)
	return &Result{}
}

// setLimits replaces the limits record.
func (s *state) setLimits(c *SetLimits) *Result {
	s.limits = c.Limits
	return &Result{}
}

// emptyJobBytes is the size estimate of an empty job named name.
func emptyJobBytes(name string) int64 { return estJob + int64(len(name)) }

// estimate computes the job's size estimate from scratch (limits.go);
// apply keeps jobBytes equal to it incrementally.
func (j *job) estimate() int64 {
	n := emptyJobBytes(j.name) + int64(len(j.save.holder))
	if j.ds != nil {
		n += j.ds.bytes
	}
	for _, id := range sortedKeys(j.uploads) {
		n += j.uploads[id].size(id)
	}
	for _, id := range sortedKeys(j.groups) {
		n += groupBytes(id, j.groups[id])
	}
	for _, id := range sortedKeys(j.timeouts) {
		for _, r := range j.timeouts[id] {
			n += roundBytes(id, len(r.members))
		}
	}
	for _, key := range sortedKeys(j.kv) {
		n += kvBytes(key, j.kv[key].value)
	}
	for _, c := range j.pos.cursors {
		n += c.bytes()
	}
	if j.mix != nil {
		n += j.mix.bytes()
	}
	return n
}

// recount rebuilds the derived counters of the job from its content.
func (j *job) recount() {
	j.jobBytes = j.estimate()
	j.groupData, j.staged = 0, 0
	for _, id := range sortedKeys(j.groups) {
		j.groupData += int64(j.groups[id].dataSize)
	}
	for _, id := range sortedKeys(j.uploads) {
		j.staged += j.uploads[id].chunks.len()
	}
	j.updateTimeoutsDeadline()
	j.updateGroupDeadline()
}

// room checks that the state may grow by delta bytes of the job's, counting
// the job itself when it is new.
func (j *job) room(delta int64) error {
	if delta <= 0 {
		return nil
	}
	total := j.cluster.stateBytes + delta
	if !j.exists() {
		total += j.jobBytes
	}
	if l := j.cluster.effectiveLimits().MaxStateBytes; total > l {
		return limitf("max_state_bytes", l, "job %q would bring the state to %d bytes", j.name, total)
	}
	return nil
}

// account adds delta to the job's size estimate, and to the state's when
// the job is one of the jobs.
func (j *job) account(delta int64) {
	j.jobBytes += delta
	if j.exists() {
		j.cluster.stateBytes += delta
	}
}
