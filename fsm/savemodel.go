package fsm

// saveLease is the replicated save-model lease: at most one trainer holds
// it, until deadline in FSM time.
type saveLease struct {
	holder   string
	deadline int64
}

func (j *job) requestSaveModel(c *RequestSaveModel) *Result {
	l := &j.save
	if l.holder != "" && l.holder != c.TrainerID && l.deadline > j.cluster.clock {
		return &Result{Granted: false}
	}
	delta := int64(len(c.TrainerID) - len(l.holder))
	if err := j.room(delta); err != nil {
		return errResult(err)
	}
	j.account(delta)
	l.holder = c.TrainerID
	l.deadline = j.cluster.clock + int64(c.BlockDur)
	return &Result{Granted: true, Lease: c.BlockDur}
}

func (j *job) expireSaveLease() {
	if j.save.holder != "" && j.save.deadline <= j.cluster.clock {
		j.account(-int64(len(j.save.holder)))
		j.save = saveLease{}
	}
}
