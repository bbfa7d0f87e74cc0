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
	if total := s.bytes + emptyJobBytes(name); total > l.MaxStateBytes {
		return limitf("max_state_bytes", l.MaxStateBytes, "creating job %q would bring the state to %d bytes", name, total)
	}
	return nil
}

// addJob makes j one of the jobs, numbering it.
func (s *state) addJob(j *job) {
	s.jobSeq++
	j.seq = s.jobSeq
	s.jobs[j.name] = j
	s.bytes += j.bytes
}

// dropJob deletes job j with everything it holds. The watches of its groups
// are woken: with the job gone they answer ErrClosed.
func (s *state) dropJob(j *job) {
	for _, id := range sortedKeys(j.groups) {
		j.changedGroup(id)
	}
	s.bytes -= j.bytes
	delete(s.jobs, j.name)
}

// exists reports whether j is one of the jobs, rather than the empty job a
// command to an unknown job runs on (dispatch).
func (s *job) exists() bool { return s.state.jobs[s.name] == s }

// idleExpired reports whether the job is due for collection: JobTTL is on,
// nothing is leased or gathered, and no command addressed it for JobTTL.
func (s *job) idleExpired() bool {
	d, ok := s.ttlDeadline()
	return ok && d <= s.clock
}

// ttlDeadline returns when the job is collected if nothing happens before:
// false while JobTTL is off or the job has a task lease out, a save-model
// holder, an allgather group or a kept round that timed out.
func (s *job) ttlDeadline() (int64, bool) {
	ttl := s.effectiveLimits().JobTTL
	if ttl <= 0 || s.queues[qPending].n != 0 || s.save.holder != "" || len(s.groups) != 0 || len(s.timeouts) != 0 {
		return 0, false
	}
	return s.lastActivity + int64(ttl), true
}

// createJob creates the job (dispatch adds it); an existing job is
// ignored.
func (s *job) createJob(*CreateJob) *Result {
	if s.exists() {
		return &Result{Ignored: true}
	}
	return &Result{}
}

// deleteJob deletes the job with everything it holds; a job created again
// under the same name starts from nothing.
func (s *job) deleteJob(*DeleteJob) *Result {
	if !s.exists() {
		return errResult(ErrUnknownJob)
	}
	s.state.dropJob(s)
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
// apply keeps bytes equal to it incrementally.
func (s *job) estimate() int64 {
	n := emptyJobBytes(s.name) + int64(len(s.save.holder))
	if s.ds != nil {
		n += s.ds.bytes
	}
	for _, id := range sortedKeys(s.uploads) {
		n += s.uploads[id].size(id)
	}
	for _, id := range sortedKeys(s.groups) {
		n += groupBytes(id, s.groups[id])
	}
	for _, id := range sortedKeys(s.timeouts) {
		for _, r := range s.timeouts[id] {
			n += roundBytes(id, len(r.members))
		}
	}
	for _, key := range sortedKeys(s.kv) {
		n += kvBytes(key, s.kv[key].value)
	}
	return n
}

// recount rebuilds the derived counters of the job from its content.
func (s *job) recount() {
	s.bytes = s.estimate()
	s.groupData, s.staged = 0, 0
	for _, id := range sortedKeys(s.groups) {
		s.groupData += int64(s.groups[id].dataSize)
	}
	for _, id := range sortedKeys(s.uploads) {
		s.staged += len(s.uploads[id].chunks)
	}
	s.updateTimeoutsDeadline()
	s.updateGroupDeadline()
}

// room checks that the state may grow by delta bytes of the job's, counting
// the job itself when it is new.
func (s *job) room(delta int64) error {
	if delta <= 0 {
		return nil
	}
	total := s.state.bytes + delta
	if !s.exists() {
		total += s.bytes
	}
	if l := s.effectiveLimits().MaxStateBytes; total > l {
		return limitf("max_state_bytes", l, "job %q would bring the state to %d bytes", s.name, total)
	}
	return nil
}

// account adds delta to the job's size estimate, and to the state's when
// the job is one of the jobs.
func (s *job) account(delta int64) {
	s.bytes += delta
	if s.exists() {
		s.state.bytes += delta
	}
}
