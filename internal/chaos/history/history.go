// Package history records what the clients of a fault-injection run did and
// saw: every operation with its invoke and return times, its input and its
// output. The checkers read it; a failing run writes it to a file so the
// run can be studied and replayed.
package history

import (
	"encoding/json"
	"io"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
)

// Kind names an operation.
type Kind string

// Operation kinds.
const (
	GetTask      Kind = "get_task"
	TaskFinished Kind = "task_finished"
	TaskFailed   Kind = "task_failed"
	// FinishAndGet is a GetTask that carries the task its caller finished
	// (protocol level 9): one log entry finishes Meta, exactly as a
	// TaskFinished of it would, then leases the next task as a GetTask of
	// Pass. Its answer, an error too, says how the finish went (Finish).
	FinishAndGet Kind = "finish_and_get"
	SaveModel    Kind = "save_model"
	Join         Kind = "join"  // allgather join; the result arrives as a Watch op
	Watch        Kind = "watch" // allgather result of one join
	Leave        Kind = "leave"
	KVGet        Kind = "kv_get" // read a key of the job's register
	KVCAS        Kind = "kv_cas" // compare-and-set a key of the job's register

	// The register store's writes (protocol level 5), each one log entry.
	KVDelete       Kind = "kv_delete"        // delete Key, at version Expect only when not 0
	KVDeletePrefix Kind = "kv_delete_prefix" // delete every key that starts with Key
	KVAdd          Kind = "kv_add"           // add Amount to the decimal integer Key holds
	KVMultiSet     Kind = "kv_multi_set"     // store each of Values under its key of Keys
	KVAppend       Kind = "kv_append"        // append Value to what Key holds
	KVCompareValue Kind = "kv_compare_value" // store Value if Key holds ExpectValue (absent when empty)

	// The client's own session traffic, which the harness sees on the
	// wire (Session names the session), and the harness's stalls of an
	// actor. See Background.
	OpenSession    Kind = "open_session"    // an answer opening a session, applied at AppliedAt
	KeepAlive      Kind = "keep_alive"      // a keep-alive answered: Code "" or session_expired
	SessionRefused Kind = "session_refused" // an attempt of a write under the session refused with session_expired
	Stall          Kind = "stall"           // the actor was paused or cut off (Data) from Invoke to Return
)

// Background reports whether operations of kind k are not calls of the
// workload but what its clients did by themselves (opening sessions and
// keeping them alive, attempts they went past) or what the harness did to
// them: they show neither availability nor progress.
func (k Kind) Background() bool {
	switch k {
	case OpenSession, KeepAlive, SessionRefused, Stall:
		return true
	}
	return false
}

// Never is the return time of an operation whose outcome is unknown: the
// checkers assume it may have taken effect at any time after its invoke.
const Never = int64(math.MaxInt64)

// Op is one client operation. Times are nanoseconds since the run started.
type Op struct {
	Client int   `json:"client"` // one per sequential actor
	Kind   Kind  `json:"kind"`
	Invoke int64 `json:"invoke"`
	Return int64 `json:"return"` // Never when the outcome is unknown
	// Job is the job the operation addressed; "" (histories written before
	// jobs) is the default job. See JobOf.
	Job string `json:"job,omitempty"`

	// Inputs.
	Pass     int           `json:"pass,omitempty"`
	Meta     fsm.TaskMeta  `json:"meta,omitzero"` // TaskFinished, TaskFailed; FinishAndGet: the task it finished
	Trainer  string        `json:"trainer,omitempty"`
	BlockDur time.Duration `json:"block_dur,omitempty"`
	Group    string        `json:"group,omitempty"`
	Member   uuid.UUID     `json:"member,omitzero"`
	NumPeers int           `json:"num_peers,omitempty"`
	Data     string        `json:"data,omitempty"`
	Key      string        `json:"key,omitempty"`    // the register's operations but KVMultiSet (KVDeletePrefix: the prefix)
	Expect   uint64        `json:"expect,omitempty"` // KVCAS: the version expected, 0 for absent; KVDelete: the version to delete, 0 for any
	Value    string        `json:"value,omitempty"`  // KVCAS, KVCompareValue: the value to store; KVAppend: the bytes to append
	// ExpectValue is the value a KVCompareValue expects, "" for absent.
	ExpectValue string `json:"expect_value,omitempty"`
	Amount      int64  `json:"amount,omitempty"` // KVAdd
	// Keys and Values are the pairs of a KVMultiSet.
	Keys   []string `json:"keys,omitempty"`
	Values []string `json:"values,omitempty"`
	// Session is the session the operation was made under, 0 for none:
	// for a task or save-model call, the one its last attempt named (a
	// call whose session had ended before its first attempt goes again
	// under a new one); for the session kinds, the session concerned.
	Session uint64 `json:"session,omitempty"`
	// Path is the endpoint of a write, for SessionRefused.
	Path string `json:"path,omitempty"`

	// Outputs. Code is "" for success or the wire error code.
	Code string `json:"code,omitempty"`
	// Task, Holder and Chunks are a GetTask's or a FinishAndGet's: the
	// leased task, the session the answer says holds it (0 for a lease
	// with a deadline), and the files of its chunks.
	Task    fsm.TaskMeta `json:"task,omitzero"`
	Holder  uint64       `json:"holder,omitempty"`
	Chunks  []string     `json:"chunks,omitempty"`
	Ignored bool         `json:"ignored,omitempty"` // finished/failed had no effect
	// Finish is, for a FinishAndGet, how its answer (an error answer too)
	// says the finish went; nil when it says nothing of it.
	Finish     *FinishOutcome `json:"finish,omitempty"`
	Granted    bool           `json:"granted,omitempty"` // SaveModel
	AppliedAt  int64          `json:"applied_at,omitempty"`
	Generation uint64         `json:"generation,omitempty"` // Join
	Result     []string       `json:"result,omitempty"`     // Watch: every member's data in order
	Rank       int            `json:"rank,omitempty"`
	// KVGet and KVCAS: whether the CAS stored its value, and the key as the
	// answer reported it (the new value and version after a swap, else the
	// key as it was).
	Swapped bool   `json:"swapped,omitempty"`
	Found   bool   `json:"found,omitempty"`
	Read    string `json:"read,omitempty"`
	Version uint64 `json:"version,omitempty"`
	// The answers of the store's writes: a KVCompareValue's are Swapped,
	// Found, Read and Version, as a KVCAS's; a KVDelete's Found and
	// Version (the key when the delete ran) and Number 1 when it deleted;
	// a KVAdd's Number (the sum) and Version, a KVAppend's Number (the
	// length) and Version; a KVDeletePrefix's Number (the keys deleted);
	// a KVMultiSet's Versions, one per key.
	Number   int64    `json:"number,omitempty"`
	Versions []uint64 `json:"versions,omitempty"`
}

// FinishOutcome is how the finish a FinishAndGet carried went, as its
// answer said: Code is "" when the finish counted (Ignored when it was
// ignored), else the error a TaskFinished of it would have got, and the
// finish changed nothing.
type FinishOutcome struct {
	Code    string `json:"code,omitempty"`
	Ignored bool   `json:"ignored,omitempty"`
}

// DefaultJob is the job of an operation whose Job is empty.
const DefaultJob = fsm.DefaultJob

// JobOf returns the job op addressed: its Job, or DefaultJob when that is
// empty.
func JobOf(op Op) string {
	if op.Job == "" {
		return DefaultJob
	}
	return op.Job
}

// ByJob splits ops by job, keeping their order within each job.
func ByJob(ops []Op) map[string][]Op {
	out := map[string][]Op{}
	for _, op := range ops {
		j := JobOf(op)
		out[j] = append(out[j], op)
	}
	return out
}

// Unknown reports whether the outcome is unknown.
func (o Op) Unknown() bool { return o.Return == Never }

// Recorder collects operations from concurrent clients.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts the run's clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now returns the time since the run started.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records a finished (or unknown) operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the operations in the order they were added.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Write writes ops as JSON lines.
func Write(w io.Writer, ops []Op) error {
	enc := json.NewEncoder(w)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return nil
}

// Read reads JSON lines written by Write.
func Read(r io.Reader) ([]Op, error) {
	dec := json.NewDecoder(r)
	var ops []Op
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}
