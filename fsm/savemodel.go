package fsm

// saveLease is the replicated save-model lease: at most one trainer holds
// it, until deadline in FSM time.
type saveLease struct {
	holder   string
	deadline int64
}

func (s *state) requestSaveModel(c *RequestSaveModel) *Result {
	l := &s.save
	if l.holder != "" && l.holder != c.TrainerID && l.deadline > s.clock {
		return &Result{Granted: false}
	}
	l.holder = c.TrainerID
	l.deadline = s.clock + int64(c.BlockDur)
	return &Result{Granted: true}
}

func (s *state) expireSaveLease() {
	if s.save.holder != "" && s.save.deadline <= s.clock {
		s.save = saveLease{}
	}
}
