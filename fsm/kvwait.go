package fsm

// A KVWait tells a register long poll when to look again
// (FSM.KVWatchWait): once C is closed, the key may have changed. It is not
// part of the state; Release it when done waiting.
type KVWait struct {
	// C is closed when the key is stored or deleted (by any of the
	// register's writes), when its job is deleted, or when a snapshot is
	// restored. Nothing else closes it: a write to another key, or to the
	// same key of another job, does not.
	C <-chan struct{}

	f        *FSM
	job, key string
	kw       *kvWaiters
}

// kvWaiters are the long polls waiting on one key of one job. The entry
// exists while someone waits: it is created by the first KVWatchWait,
// dropped when the key changes (its channel closed) or when the last
// waiter releases it. So the entries are bounded by the waiting polls.
type kvWaiters struct {
	ch chan struct{}
	n  int // waits holding ch
}

// kvChange is what an apply changed for the register watches: key of
// job, or, with key "" (never a key: ValidateKVKey refuses it), every key
// of the job, which was deleted. The FSM takes the changes after each
// apply to wake only the watches they concern; they are not state.
type kvChange struct {
	job, key string
}

// changedKV records that key of the job's register was stored or deleted.
func (j *job) changedKV(key string) {
	j.cluster.kvChanges = append(j.cluster.kvChanges, kvChange{job: j.name, key: key})
}

// takeKVChanges returns the register changes recorded since the last call.
func (s *state) takeKVChanges() []kvChange {
	c := s.kvChanges
	s.kvChanges = nil
	return c
}

// KVWatchWait returns what key holds in the register of job ("" is
// DefaultJob), as KV does, and a KVWait whose channel is closed once that
// may have changed. It looks and registers under one read lock, so no
// change after the look goes unnoticed. The caller must Release the wait
// once it stops waiting on it.
func (f *FSM) KVWatchWait(job, key string) (KVValue, *KVWait) {
	job = jobName(job)
	// The read lock keeps out every apply from the look to the
	// registration, and an apply notifies only after it released its
	// write lock: a change after the look closes what is registered.
	f.mu.RLock()
	defer f.mu.RUnlock()
	var v KVValue
	if j := f.s.jobs[job]; j != nil {
		v = j.kvValue(key)
	}
	return v, f.waitKV(job, key)
}

// waitKV registers a wait on key of job.
func (f *FSM) waitKV(job, key string) *KVWait {
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	if f.kvWaits == nil {
		f.kvWaits = make(map[string]map[string]*kvWaiters)
	}
	keys := f.kvWaits[job]
	if keys == nil {
		keys = make(map[string]*kvWaiters)
		f.kvWaits[job] = keys
	}
	kw := keys[key]
	if kw == nil {
		kw = &kvWaiters{ch: make(chan struct{})}
		keys[key] = kw
	}
	kw.n++
	return &KVWait{C: kw.ch, f: f, job: job, key: key, kw: kw}
}

// Release ends the wait; the channel may still be read. Calling it more
// than once, or on a nil KVWait, does nothing.
func (w *KVWait) Release() {
	if w == nil || w.kw == nil {
		return
	}
	f := w.f
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	kw := w.kw
	w.kw = nil
	keys := f.kvWaits[w.job]
	if keys[w.key] != kw {
		return // woken: the entry is gone already
	}
	if kw.n--; kw.n == 0 {
		delete(keys, w.key)
		if len(keys) == 0 {
			delete(f.kvWaits, w.job)
		}
	}
}

// wakeKVLocked wakes the waits that change c concerns; f.notifyMu is held.
func (f *FSM) wakeKVLocked(c kvChange) {
	keys := f.kvWaits[c.job]
	if keys == nil {
		return
	}
	if c.key == "" {
		for _, key := range sortedKeys(keys) {
			close(keys[key].ch)
		}
		delete(f.kvWaits, c.job)
		return
	}
	if kw := keys[c.key]; kw != nil {
		close(kw.ch)
		delete(keys, c.key)
		if len(keys) == 0 {
			delete(f.kvWaits, c.job)
		}
	}
}

// wakeAllKVLocked wakes every register wait, after a restore replaced the
// whole state; f.notifyMu is held.
func (f *FSM) wakeAllKVLocked() {
	for _, job := range sortedKeys(f.kvWaits) {
		f.wakeKVLocked(kvChange{job: job})
	}
}
