package rpc

import "time"

// Data positions (protocol level 7). A cursor is a point in the job's
// dispatch, committed with a model checkpoint: the pass, the tasks
// finished in it, and how many records of each task in flight the
// training loop had consumed. Restoring it puts the job's dispatch back
// there, so that the records still to train in the pass are exactly those
// the checkpoint had not trained, at any number of trainers.
//
// A record counts as consumed once it is handed to the training loop
// (NextRecord returned it, or the loader yielded its batch in the main
// process); a task is finished once all its records are consumed. The
// consumed offsets reach the log only with a cursor: the commit carries
// them (one trainer), or each trainer reports them (PathTaskProgress)
// before one of them commits.
const (
	// PathCursors commits a cursor of the job (POST) and lists the job's
	// cursors (GET).
	PathCursors = "/v1/cursors"
	// PathCursor shows cursor {id} with its in-flight tasks (GET) and
	// deletes it (DELETE).
	PathCursor = "/v1/cursors/{id}"
	// PathCursorRestore puts the job's dispatch back to cursor {id}
	// (POST).
	PathCursorRestore = "/v1/cursors/{id}/restore"
	// PathTaskProgress records how many records of its leased tasks a
	// trainer's training loop has consumed (POST), for the next cursor.
	PathTaskProgress = "/v1/task/progress"

	// CursorParam names the cursor in the paths above.
	CursorParam = "id"

	// CursorProtocol is the protocol level cursors need.
	CursorProtocol = 7

	// MaxProgress bounds the progress entries of one report or commit.
	MaxProgress = 4096
)

// TaskProgress is how far the training loop has consumed a task it holds
// under lease Meta: Consumed is the number of the task's records, from its
// first, that were handed to the training loop, counting the ones a
// restored cursor skipped (Task.Skip). A report of a task no longer leased
// under Meta changes nothing.
type TaskProgress struct {
	Meta     TaskMeta `json:"meta"`
	Consumed int64    `json:"consumed"`
}

// ReportProgressRequest records the consumed offsets of tasks the caller
// holds, for the next cursor of the job.
type ReportProgressRequest struct {
	Progress []TaskProgress `json:"progress"`
}

// ReportProgressResponse says how many of the entries named a current
// lease and were recorded.
type ReportProgressResponse struct {
	Recorded  int       `json:"recorded"`
	AppliedAt time.Time `json:"applied_at"`
}

// CommitCursorRequest commits a cursor of the job's dispatch as it is
// now, with Progress recorded first (as a ReportProgressRequest would).
//
// Step is the caller's own label of the checkpoint (the training step),
// kept with the cursor. TrainerID, when set, fences the commit with the
// save-model lease: it is refused (cursor_fenced) while another trainer
// holds the lease. Generation, when not 0, fences it with restores: it is
// refused (cursor_fenced) once the job's dispatch was restored after the
// generation the caller read (CursorInfo.Generation, ListCursorsResponse).
type CommitCursorRequest struct {
	Step       int64          `json:"step"`
	Progress   []TaskProgress `json:"progress,omitempty"`
	TrainerID  string         `json:"trainer_id,omitempty"`
	Generation uint64         `json:"generation,omitempty"`
}

// CursorInfo describes a cursor.
type CursorInfo struct {
	// ID names the cursor in its job; ids only grow.
	ID uint64 `json:"id"`
	// Step is the commit's label.
	Step int64 `json:"step"`
	// Pass is the pass the job was in.
	Pass int `json:"pass"`
	// Tasks is the number of tasks of the dataset; Finished of them were
	// finished in the pass, and InFlight more were partly consumed.
	Tasks    int `json:"tasks"`
	Finished int `json:"finished"`
	InFlight int `json:"in_flight"`
	// Records is the number of records of the pass the cursor counts as
	// consumed: those of the finished tasks and the consumed parts of the
	// others.
	Records int64 `json:"records"`
	// Generation is the job's restore generation when it was committed:
	// 1 before the job's first RestoreCursor, and one more after each.
	Generation uint64 `json:"generation"`
	// Bytes is what the cursor takes in the state.
	Bytes int64 `json:"bytes"`
	// CreatedAt is the FSM time of the commit.
	CreatedAt time.Time `json:"created_at"`
}

// CursorTask is a task partly consumed at a cursor: the first Consumed of
// its records were.
type CursorTask struct {
	Task     int   `json:"task"`
	Consumed int64 `json:"consumed"`
}

// CommitCursorResponse names the cursor committed.
type CommitCursorResponse struct {
	Cursor    CursorInfo `json:"cursor"`
	AppliedAt time.Time  `json:"applied_at"`
}

// ListCursorsResponse lists a job's cursors, oldest first, and its
// current restore generation (1 before any restore).
type ListCursorsResponse struct {
	Job        string       `json:"job"`
	Generation uint64       `json:"generation"`
	Cursors    []CursorInfo `json:"cursors"`
}

// CursorResponse is one cursor with its partly consumed tasks.
type CursorResponse struct {
	Job    string       `json:"job"`
	Cursor CursorInfo   `json:"cursor"`
	Tasks  []CursorTask `json:"tasks"`
}

// RestoreCursorRequest restores the cursor its path names; it has no
// fields.
type RestoreCursorRequest struct{}

// RestoreCursorResponse tells what a restore did: the job's dispatch is
// at the cursor's pass, Revoked leases were revoked (their holders'
// reports are refused or ignored from now on), and the job's restore
// generation is now Generation.
type RestoreCursorResponse struct {
	Cursor     CursorInfo `json:"cursor"`
	Generation uint64     `json:"generation"`
	Revoked    int        `json:"revoked"`
	AppliedAt  time.Time  `json:"applied_at"`
}

// DeleteCursorResponse says whether the cursor existed.
type DeleteCursorResponse struct {
	Deleted   bool      `json:"deleted"`
	AppliedAt time.Time `json:"applied_at"`
}
