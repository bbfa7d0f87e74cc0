package fsm

// saveLease is the replicated save-model lease: at most one trainer holds
// it, until deadline in FSM time.
type saveLease struct {
	holder   string
	deadline int64
}

func (s *job) requestSaveModel(c *RequestSaveModel) *Result {
	l := &s.save
	if l.holder != "" && l.holder != c.TrainerID && l.deadline > s.clock {
		return &Result{Granted: false}
	}
	delta := int64(len(c.TrainerID) - len(l.holder))
	if err := s.room(delta); err != nil {
		return errResult(err)
	}
	s.account(delta)
	l.holder = c.TrainerID
	l.deadline = s.clock + int64(c.BlockDur)
	return &Result{Granted: true, Lease: c.BlockDur}
}

func (s *job) expireSaveLease() {
	if s.save.holder != "" && s.save.deadline <= s.clock {
		s.account(-int64(len(s.save.holder)))
		s.save = saveLease{}
	}
}
