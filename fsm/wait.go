package fsm

import "github.com/google/uuid"

// A Wait tells an allgather long poll when to look again (FSM.WatchWait):
// once either channel is closed, the answer may have changed. It is not
// part of the state; Release it when done waiting.
type Wait struct {
	// Group is closed when the group's outcome changes for every member:
	// it completes, times out, turns overdue, closes or is forgotten, or a
	// snapshot is restored. On a replica that has not applied the join
	// yet, it is closed by the next applied entry.
	Group <-chan struct{}
	// Member is closed when the member's own slot changes: a join or a
	// leave of that member. It is nil, which never fires in a select,
	// when Group covers everything.
	Member <-chan struct{}

	f      *FSM
	key    string // waitKey(job, group)
	member uuid.UUID
	gw     *groupWaiters
	mw     *memberWaiters
}

// waitKey is the key of job's group id among the waits. A job name holds
// no '/', so the key names one group of one job.
func waitKey(job, id string) string { return job + "/" + id }

// groupWaiters are the long polls waiting on one group. The entry exists
// while someone waits: it is created by the first WatchWait, dropped when
// the group's outcome changes (its channel closed) or when the last
// waiter releases it. So the entries are bounded by the waiting polls.
type groupWaiters struct {
	ch       chan struct{}
	n        int // waits holding ch
	byMember map[uuid.UUID]*memberWaiters
}

// memberWaiters are the long polls waiting on one member of a group.
type memberWaiters struct {
	ch chan struct{}
	n  int
}

// waitGroup registers a wait on member of group id of job.
func (f *FSM) waitGroup(job, id string, member uuid.UUID) *Wait {
	key := waitKey(job, id)
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	if f.waits == nil {
		f.waits = make(map[string]*groupWaiters)
	}
	gw := f.waits[key]
	if gw == nil {
		gw = &groupWaiters{ch: make(chan struct{}), byMember: make(map[uuid.UUID]*memberWaiters)}
		f.waits[key] = gw
	}
	mw := gw.byMember[member]
	if mw == nil {
		mw = &memberWaiters{ch: make(chan struct{})}
		gw.byMember[member] = mw
	}
	gw.n++
	mw.n++
	return &Wait{Group: gw.ch, Member: mw.ch, f: f, key: key, member: member, gw: gw, mw: mw}
}

// Release ends the wait; the channels may still be read. Calling it more
// than once, or on a nil Wait, does nothing.
func (w *Wait) Release() {
	if w == nil || w.gw == nil {
		return
	}
	f := w.f
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	gw, mw := w.gw, w.mw
	w.gw, w.mw = nil, nil
	if f.waits[w.key] != gw {
		return // woken: the entry is gone already
	}
	if gw.byMember[w.member] == mw {
		if mw.n--; mw.n == 0 {
			delete(gw.byMember, w.member)
		}
	}
	if gw.n--; gw.n == 0 {
		delete(f.waits, w.key)
	}
}

// wakeLocked wakes the waits that change c concerns; f.notifyMu is held.
func (f *FSM) wakeLocked(c groupChange) {
	key := waitKey(c.job, c.group)
	gw := f.waits[key]
	if gw == nil {
		return
	}
	if c.member == uuid.Nil {
		// Every wait on the group holds gw.ch; the member entries go
		// with the group entry.
		close(gw.ch)
		delete(f.waits, key)
		return
	}
	if mw := gw.byMember[c.member]; mw != nil {
		close(mw.ch)
		delete(gw.byMember, c.member)
	}
}

// notifyAll wakes every wait, the register's too, after a restore replaced the whole state.
func (f *FSM) notifyAll() {
	f.notifyMu.Lock()
	for _, key := range sortedKeys(f.waits) {
		close(f.waits[key].ch)
		delete(f.waits, key)
	}
	f.wakeAllKVLocked()
	f.notifyMu.Unlock()
	f.notify(nil, nil)
}
