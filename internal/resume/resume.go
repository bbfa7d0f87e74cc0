// Package resume checks the data position saved with the model: that
// training resumed from checkpoints, across full restarts of every
// trainer at any number of trainers and readers, trains every record of
// every pass exactly once.
//
// A schedule runs trainers on real clients against a cluster. Each
// trainer has one or more readers (a Client each, as a PyTorch DataLoader
// has workers); a training step takes a record from one of them and
// records its id, as a training loop that trained on it. Every few steps
// the trainers checkpoint: every reader reports its progress, one commits
// a cursor, and the model (here, the ids trained since the last
// checkpoint) is saved with the cursor's id. At random points, between a
// commit and its save included, every trainer is killed: its readers are
// abandoned where they are, and a new set of trainers of a random size
// restores the last complete checkpoint (RestoreCursor) and goes on.
// Over the schedule, the ids trained up to each restored checkpoint,
// concatenated with those of the last run, must hold every record of
// every pass exactly once.
package resume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/recordio"
)

// Config is one schedule.
type Config struct {
	// Addrs are the cluster's API addresses.
	Addrs []string
	// Job is the job the schedule reads; its dataset must be set, each
	// record a distinct id, and no other trainer may read it.
	Job string
	// Records are the ids of the dataset's records: every pass must
	// train each once.
	Records []string
	// Passes is the number of passes to train (at least 1).
	Passes int
	// Restarts is the number of full restarts (at least 1).
	Restarts int
	// MaxTrainers and MaxReaders bound the random number of trainers of
	// a run (1 to MaxTrainers) and of readers of a trainer (1 to
	// MaxReaders).
	MaxTrainers, MaxReaders int
	// Seed makes the schedule's choices.
	Seed uint64
	// Options are the clients' options besides the job's.
	Options []client.Option
	// Chaos, when set, is called at random steps, with no checkpoint
	// under way, to inject a fault (a leader's SIGKILL); it must not
	// block.
	Chaos func()
	// Logf logs the schedule's events, when set.
	Logf func(format string, args ...any)
}

// Result is what a schedule did and found.
type Result struct {
	// Restarts, Checkpoints, Torn (cursors committed whose model was
	// never saved: the kill came between) and Faults (the calls of
	// Config.Chaos) count the events;
	// SessionsEnded counts the restarts because a live trainer's session
	// ended.
	Restarts, Checkpoints, Torn, Faults, SessionsEnded int
	// Trained is the number of ids in the trained record (the
	// checkpoints' and the last run's).
	Trained int
	// Duplicates and Losses count the records of some pass trained more
	// than once, and never.
	Duplicates, Losses int
	// Problems describes the first few duplicates and losses.
	Problems []string
}

// errSessionEnded means that a trainer's session ended while it lived:
// records it trained may go to another trainer, so the trainers restart
// from the last checkpoint, as a torchrun agent restarts its workers.
var errSessionEnded = errors.New("a trainer's session ended")

// trained is one record handed to the training loop.
type trained struct {
	pass int
	id   string
}

// reader is one Client's reader of a trainer.
type reader struct {
	c     *client.Client
	pass  int
	ended bool // the pass gave it nothing more
}

// schedule is the state of one Run.
type schedule struct {
	cfg   Config
	rng   *rand.Rand
	res   Result
	saved []trained // the records of complete checkpoints
	run   []trained // the records since the last checkpoint
	// checkpoint is the cursor of the last complete checkpoint, and
	// generation the job's restore generation the run reads under.
	checkpoint, generation uint64
	pass                   int
	trainers               [][]*reader
	// trainedInRun counts the records the current run trained, saved
	// or not.
	trainedInRun int
	dead         []*client.Client
	admin        *client.Client
}

// Run runs one schedule and returns what it found; the error is of the
// cluster's calls (the context's among them), not of the check.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Passes < 1 || cfg.Restarts < 1 || cfg.MaxTrainers < 1 || cfg.MaxReaders < 1 || len(cfg.Records) == 0 {
		return Result{}, errors.New("resume: a schedule needs passes, restarts, trainers, readers and records")
	}
	s := &schedule{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x7265_7375_6d65))}
	var err error
	if s.admin, err = s.client(); err != nil {
		return Result{}, err
	}
	defer s.admin.Close()
	defer s.bury()
	// The model as it starts: the first checkpoint, before any record.
	cur, err := s.admin.CommitCursor(ctx, 0)
	if err != nil {
		return s.res, fmt.Errorf("resume: the first cursor: %w", err)
	}
	s.checkpoint, s.generation, s.pass = cur.ID, cur.Generation, cur.Pass
	if err := s.startRun(ctx); err != nil {
		return s.res, err
	}
	// A run is killed once it has trained crashAt records, and the
	// trainers checkpoint every checkpointAt steps.
	crashAt, checkpointAt, since := s.draw(), 3+s.rng.IntN(12), 0
	for step := 0; s.pass < cfg.Passes; step++ {
		if err := ctx.Err(); err != nil {
			return s.res, err
		}
		restarting := s.res.Restarts < cfg.Restarts
		switch {
		case s.cfg.Chaos != nil && s.rng.IntN(50) == 0:
			s.cfg.Chaos()
			s.res.Faults++
		case since >= checkpointAt:
			since, checkpointAt = 0, 3+s.rng.IntN(12)
			// The first restart comes between a commit and its save.
			torn := restarting && (s.res.Torn == 0 || s.rng.IntN(3) == 0)
			if err := s.checkpointNow(ctx, step, torn); errors.Is(err, errSessionEnded) {
				if err := s.restart(ctx, "a session ended"); err != nil {
					return s.res, err
				}
				s.res.SessionsEnded++
				continue
			} else if err != nil {
				return s.res, err
			}
			if torn {
				if err := s.restart(ctx, "between a commit and its save"); err != nil {
					return s.res, err
				}
				crashAt = s.draw()
			}
		case restarting && s.trainedInRun >= crashAt:
			if err := s.restart(ctx, "between checkpoints"); err != nil {
				return s.res, err
			}
			crashAt, since = s.draw(), 0
		default:
			took, err := s.trainStep(ctx)
			if errors.Is(err, errSessionEnded) {
				if err := s.restart(ctx, "a session ended"); err != nil {
					return s.res, err
				}
				s.res.SessionsEnded++
				continue
			}
			if err != nil {
				return s.res, err
			}
			if took {
				since++
			}
		}
	}
	s.check()
	return s.res, nil
}

// client returns a new Client of the schedule's job.
func (s *schedule) client() (*client.Client, error) {
	opts := append([]client.Option{client.WithAddrs(s.cfg.Addrs...), client.WithJob(s.cfg.Job)}, s.cfg.Options...)
	return client.NewClient(opts...)
}

func (s *schedule) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// startRun starts a new set of trainers, each reader on the pass.
func (s *schedule) startRun(ctx context.Context) error {
	s.trainers = make([][]*reader, 1+s.rng.IntN(s.cfg.MaxTrainers))
	s.trainedInRun = 0
	readers := 0
	for t := range s.trainers {
		for range 1 + s.rng.IntN(s.cfg.MaxReaders) {
			c, err := s.client()
			if err != nil {
				return err
			}
			r := &reader{c: c, pass: s.pass}
			c.StartGetRecordsContext(ctx, s.pass)
			s.trainers[t] = append(s.trainers[t], r)
			readers++
		}
	}
	s.logf("run of %d trainers, %d readers, from pass %d", len(s.trainers), readers, s.pass)
	return nil
}

// draw returns how many records a run trains before it is killed.
func (s *schedule) draw() int { return 1 + s.rng.IntN(2*len(s.cfg.Records)/3+1) }

// trainStep takes a record from a reader of a random trainer, if one has
// one within a moment, and reports whether it did; it moves to the next
// pass once every reader's pass is over and the job's is too.
func (s *schedule) trainStep(ctx context.Context) (bool, error) {
	tr := s.trainers[s.rng.IntN(len(s.trainers))]
	r := tr[s.rng.IntN(len(tr))]
	if !r.ended {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		rec, err := r.c.NextRecordContext(wctx)
		cancel()
		switch {
		case err == nil:
			s.run = append(s.run, trained{pass: r.pass, id: string(rec)})
			s.trainedInRun++
			return true, nil
		case errors.Is(err, client.ErrNoMoreAvailable), errors.Is(err, client.ErrPassBefore):
			r.ended = true
		case errors.Is(err, client.ErrSessionExpired):
			return false, errSessionEnded
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			return false, nil
		default:
			return false, fmt.Errorf("resume: reading pass %d: %w", r.pass, err)
		}
	}
	for _, tr := range s.trainers {
		for _, r := range tr {
			if !r.ended {
				return false, nil
			}
		}
	}
	// Every reader is over: once the job's pass is too, read the next.
	st, err := s.admin.JobContext(ctx, s.cfg.Job)
	if err != nil {
		return false, fmt.Errorf("resume: reading the job: %w", err)
	}
	if st.Pass > s.pass {
		s.pass = st.Pass
		for _, tr := range s.trainers {
			for _, r := range tr {
				r.pass, r.ended = s.pass, false
				if s.pass < s.cfg.Passes {
					r.c.StartGetRecordsContext(ctx, s.pass)
				}
			}
		}
		return false, nil
	}
	// A finish is still under way, or a reader handed a task back: read
	// again in a moment.
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(20 * time.Millisecond):
	}
	for _, tr := range s.trainers {
		for _, r := range tr {
			r.ended = false
			r.c.StartGetRecordsContext(ctx, s.pass)
		}
	}
	return false, nil
}

// checkpointNow reports every reader's progress, commits a cursor and,
// unless torn, saves the model with it.
func (s *schedule) checkpointNow(ctx context.Context, step int, torn bool) error {
	var committer *client.Client
	for _, tr := range s.trainers {
		for _, r := range tr {
			if committer == nil {
				committer = r.c
				continue
			}
			if _, err := r.c.ReportProgress(ctx); errors.Is(err, client.ErrSessionExpired) {
				return errSessionEnded
			} else if err != nil {
				return fmt.Errorf("resume: reporting progress: %w", err)
			}
		}
	}
	cur, err := committer.CommitCursor(ctx, int64(step), client.WithCursorGeneration(s.generation))
	if errors.Is(err, client.ErrSessionExpired) {
		return errSessionEnded
	}
	if err != nil {
		return fmt.Errorf("resume: committing a cursor: %w", err)
	}
	s.res.Checkpoints++
	if torn {
		s.res.Torn++
		s.logf("cursor %d committed, the model not saved", cur.ID)
		return nil
	}
	s.saved = append(s.saved, s.run...)
	s.run = nil
	s.checkpoint = cur.ID
	return nil
}

// restart kills every trainer and restores the last complete checkpoint
// with a new set of trainers.
func (s *schedule) restart(ctx context.Context, when string) error {
	s.res.Restarts++
	s.logf("restart %d (%s): %d records lost with the run, back to cursor %d", s.res.Restarts, when, len(s.run), s.checkpoint)
	s.run = nil
	// Killed: the readers stop where they are, their leases and sessions
	// still held, and are closed only after the restore.
	for _, tr := range s.trainers {
		for _, r := range tr {
			s.dead = append(s.dead, r.c)
		}
	}
	s.trainers = nil
	restored, err := s.admin.RestoreCursor(ctx, s.checkpoint)
	if err != nil {
		return fmt.Errorf("resume: restoring cursor %d: %w", s.checkpoint, err)
	}
	s.generation, s.pass = restored.Generation, restored.Cursor.Pass
	// The killed trainers' sessions end with them: their tasks, which the
	// restore revoked or which their readers leased since, come back.
	s.bury()
	return s.startRun(ctx)
}

// bury closes the clients of killed runs.
func (s *schedule) bury() {
	for _, c := range s.dead {
		c.Close()
	}
	s.dead = nil
}

// check counts, over the complete checkpoints and the last run, the
// records of each pass trained other than once.
func (s *schedule) check() {
	all := append(slices.Clone(s.saved), s.run...)
	s.res.Trained = len(all)
	count := make(map[trained]int, len(all))
	for _, t := range all {
		count[t]++
	}
	problem := func(format string, args ...any) {
		if len(s.res.Problems) < 10 {
			s.res.Problems = append(s.res.Problems, fmt.Sprintf(format, args...))
		}
	}
	for p := range s.cfg.Passes {
		for _, id := range s.cfg.Records {
			k := trained{pass: p, id: id}
			switch n := count[k]; {
			case n == 0:
				s.res.Losses++
				problem("pass %d: record %q never trained", p, id)
			case n > 1:
				s.res.Duplicates += n - 1
				problem("pass %d: record %q trained %d times", p, id, n)
			}
			delete(count, k)
		}
	}
	for k, n := range count {
		s.res.Duplicates += n
		problem("pass %d: record %q trained %d times, and no pass has it", k.pass, k.id, n)
	}
	slices.Sort(s.res.Problems)
}

// String summarises the result.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d restarts (%d torn, %d after a session ended), %d checkpoints, %d faults, %d records trained: %d duplicates, %d losses",
		r.Restarts, r.Torn, r.SessionsEnded, r.Checkpoints, r.Faults, r.Trained, r.Duplicates, r.Losses)
	for _, p := range r.Problems {
		b.WriteString("\n  " + p)
	}
	return b.String()
}

// WriteDataset writes a dataset for a schedule of job into dir: files
// RecordIO files of records records each, in chunks of about three
// records, each record its own id. It returns the files' glob and the
// ids.
func WriteDataset(dir, job string, files, records int) (pattern string, ids []string, err error) {
	for i := range files {
		var buf bytes.Buffer
		w := recordio.NewWriter(&buf, 64, recordio.NoCompression)
		for r := range records {
			id := fmt.Sprintf("%s/%03d/%04d", job, i, r)
			ids = append(ids, id)
			if _, err := w.Write([]byte(id)); err != nil {
				return "", nil, err
			}
		}
		if err := w.Close(); err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.recordio", job, i)), buf.Bytes(), 0o644); err != nil {
			return "", nil, err
		}
	}
	return filepath.Join(dir, job+"-*.recordio"), ids, nil
}
