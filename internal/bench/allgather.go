package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/rpc"
)

// AllgatherResults is the completion of allgather groups.
type AllgatherResults struct {
	Rows []AllgatherRow `json:"rows"`
}

// AllgatherRow is one group size.
type AllgatherRow struct {
	Peers int            `json:"peers"`
	Runs  []AllgatherRun `json:"runs,omitempty"`
	// Completion is the last join's acknowledgement (or the first
	// result, when one came before it) → the last member's complete result.
	Completion measure.Summary `json:"completion_ms"`
	// Joins is the first join sent → the last join acknowledged.
	Joins measure.Summary `json:"joins_ms"`
	// Client is Completion through the Go client, one per member, each
	// member decoding every member's data (Result.Data); ClientRaw is the
	// same with JoinOptions.RawResults (Result.Raw alone).
	Client    measure.Summary `json:"client_completion_ms"`
	ClientRaw measure.Summary `json:"client_raw_completion_ms"`
	// ClientRatio and ClientRawRatio are the medians of each run's client
	// completion over its raw-HTTP completion.
	ClientRatio    measure.Summary `json:"client_ratio"`
	ClientRawRatio measure.Summary `json:"client_raw_ratio"`
	Error          string          `json:"error,omitempty"`
}

// AllgatherRun is one run: a group filled over the HTTP API, then one
// through the Go client with decoding, then one with raw results.
type AllgatherRun struct {
	JoinsMs      float64 `json:"joins_ms"`
	CompletionMs float64 `json:"completion_ms"`
	ClientMs     float64 `json:"client_completion_ms"`
	ClientRawMs  float64 `json:"client_raw_completion_ms"`
}

// joinWorkers is how many joins are in flight at once.
const joinWorkers = 64

func (s *suite) allgather(ctx context.Context, res *Results) error {
	out := &AllgatherResults{}
	res.Allgather = out
	c, err := harness.StartRaft(ctx, s.bin, s.dir("allgather"), 3)
	if err != nil {
		return err
	}
	defer c.Stop()
	for _, n := range s.cfg.Peers {
		row := AllgatherRow{Peers: n}
		for run := range s.cfg.Runs {
			if err := ctx.Err(); err != nil {
				return err
			}
			group := fmt.Sprintf("bench-%d-%d-%s", n, run, uuid.NewString()[:8])
			r, err := s.allgatherRun(ctx, c, n, group)
			if err == nil {
				r.ClientMs, err = s.allgatherClientRun(ctx, c, n, group+"-client", false)
			}
			if err == nil {
				r.ClientRawMs, err = s.allgatherClientRun(ctx, c, n, group+"-raw", true)
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				row.Error = firstLine(err.Error())
				s.logf("allgather %d peers: %v\n%s", n, err, c.LogTail())
				break
			}
			row.Runs = append(row.Runs, r)
			s.logf("allgather %-5d peers run %d/%d: joins took %7.0f ms, last join → last result %7.1f ms over HTTP, %7.1f ms through the client, %7.1f ms with raw results",
				n, run+1, s.cfg.Runs, r.JoinsMs, r.CompletionMs, r.ClientMs, r.ClientRawMs)
		}
		row.summarize()
		out.Rows = append(out.Rows, row)
	}
	return nil
}

// summarize sets the row's summaries from its runs.
func (row *AllgatherRow) summarize() {
	row.Completion = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.CompletionMs }))
	row.Joins = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.JoinsMs }))
	row.Client = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.ClientMs }))
	row.ClientRaw = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.ClientRawMs }))
	row.ClientRatio = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.ClientMs / r.CompletionMs }))
	row.ClientRawRatio = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.ClientRawMs / r.CompletionMs }))
}

func collect[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// allgatherRun fills one group of n members through the HTTP API: joins go
// to the leader, joinWorkers at a time, and each member then long-polls its
// watch on node i%3, so that the results are served by all three replicas.
func (s *suite) allgatherRun(ctx context.Context, c *harness.Cluster, n int, group string) (AllgatherRun, error) {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	leader, _, err := c.Leader(lctx)
	cancel()
	if err != nil {
		return AllgatherRun{}, err
	}
	joinHC := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: joinWorkers}}
	watchHC := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer joinHC.CloseIdleConnections()
	defer watchHC.CloseIdleConnections()
	apis := c.APIs()

	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	acked := make([]time.Time, n)
	done := make([]time.Time, n)
	errs := make([]error, n)
	jobs := make(chan int)
	var joins, watches sync.WaitGroup
	start := time.Now()
	for range min(n, joinWorkers) {
		joins.Add(1)
		go func() {
			defer joins.Done()
			for i := range jobs {
				member := uuid.New()
				data, _ := json.Marshal(fmt.Sprintf("trainer-%05d", i))
				var jr rpc.JoinResponse
				err := postJSON(rctx, joinHC, leader.APIAddr, rpc.PathAllgatherJoin, member.String()+"/1",
					rpc.JoinRequest{Group: group, Member: member, NumPeers: n, Data: data, Timeout: rpc.Duration(10 * time.Minute)}, &jr)
				acked[i] = time.Now()
				if err != nil {
					errs[i] = fmt.Errorf("join %d: %w", i, err)
					continue
				}
				watches.Add(1)
				go func() {
					defer watches.Done()
					done[i], errs[i] = watch(rctx, watchHC, apis[i%len(apis)], group, member, jr.Generation)
				}()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	joins.Wait()
	watches.Wait()
	if err := firstError(errs); err != nil {
		return AllgatherRun{}, err
	}
	lastJoin, took := completion(acked, done)
	return AllgatherRun{JoinsMs: measure.Millis(lastJoin.Sub(start)), CompletionMs: measure.Millis(took)}, nil
}

// firstError returns the first error of errs that is not nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// completion returns the last join's acknowledgement among acked and how
// long after it the last result of done came. A result that came before
// that acknowledgement moves the start to it, the group being complete
// then: on a busy machine the last member may read its acknowledgement
// after others read their results.
func completion(acked, done []time.Time) (lastJoin time.Time, took time.Duration) {
	var firstResult, lastResult time.Time
	for i := range acked {
		if acked[i].After(lastJoin) {
			lastJoin = acked[i]
		}
		if firstResult.IsZero() || done[i].Before(firstResult) {
			firstResult = done[i]
		}
		if done[i].After(lastResult) {
			lastResult = done[i]
		}
	}
	from := lastJoin
	if firstResult.Before(from) {
		from = firstResult
	}
	return lastJoin, lastResult.Sub(from)
}

// allgatherClientRun fills one group of n members as trainers do, through
// the Go client: one client per member, given the three nodes' addresses
// (each member's list starting at node i mod 3), joinWorkers joins at a
// time. Each member then waits for its Result, decoding every member's
// data unless raw asks for JoinOptions.RawResults, on this machine's
// cores, which the cluster shares: unlike allgatherRun, this measures
// what a member pays after the master answers, too. It returns the last
// join's acknowledgement → the last member's Result, in milliseconds.
func (s *suite) allgatherClientRun(ctx context.Context, c *harness.Cluster, n int, group string, raw bool) (float64, error) {
	if err := checkOpenFiles(2*n + 1024); err != nil {
		return 0, fmt.Errorf("allgather through the client at %d members: %w", n, err)
	}
	apis := c.APIs()
	clients := make([]*client.Client, n)
	defer func() {
		var wg sync.WaitGroup
		for _, cl := range clients {
			if cl != nil {
				wg.Go(func() { cl.Close() })
			}
		}
		wg.Wait()
	}()
	for i := range clients {
		addrs := append(slices.Clone(apis[i%len(apis):]), apis[:i%len(apis)]...)
		cl, err := client.NewClient(client.WithAddrs(addrs...))
		if err != nil {
			return 0, err
		}
		clients[i] = cl
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	acked := make([]time.Time, n)
	done := make([]time.Time, n)
	errs := make([]error, n)
	jobs := make(chan int)
	var joins, results sync.WaitGroup
	for range min(n, joinWorkers) {
		joins.Go(func() {
			for i := range jobs {
				w, err := clients[i].JoinContext(rctx, group, uuid.New(), n, fmt.Sprintf("trainer-%05d", i),
					client.JoinOptions{Timeout: 10 * time.Minute, RawResults: raw})
				acked[i] = time.Now()
				if err != nil {
					errs[i] = fmt.Errorf("join %d: %w", i, err)
					continue
				}
				results.Go(func() {
					r := <-w.C
					done[i] = time.Now()
					switch {
					case r.Err != nil:
						errs[i] = fmt.Errorf("member %d: %w", i, r.Err)
					case len(r.Raw) != n || raw != (r.Data == nil):
						errs[i] = fmt.Errorf("member %d: %d raw values and %d decoded, of %d members", i, len(r.Raw), len(r.Data), n)
					}
				})
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	joins.Wait()
	results.Wait()
	if err := firstError(errs); err != nil {
		return 0, err
	}
	_, took := completion(acked, done)
	return measure.Millis(took), nil
}

// checkOpenFiles reports when this process may not open need files
// (Go raises the soft limit to the hard one at start).
func checkOpenFiles(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // no limit to check
	}
	if lim.Cur < uint64(need) {
		return fmt.Errorf("needs about %d open files, and the limit is %d (raise ulimit -n)", need, lim.Cur)
	}
	return nil
}

// watch long-polls one member's watch on the node at addr until the group
// is complete, and returns when the complete answer had been read. The
// answer's data is read in full but not decoded: in a real job every
// member decodes its copy on its own host, while here the 4096 members
// would share this machine's cores with the cluster, which would then
// measure the decoding rather than the master. The status is read from
// the answer's first tokens.
func watch(ctx context.Context, hc *http.Client, addr, group string, member uuid.UUID, gen uint64) (time.Time, error) {
	q := url.Values{
		rpc.WatchParamGroup:      {group},
		rpc.WatchParamMember:     {member.String()},
		rpc.WatchParamGeneration: {strconv.FormatUint(gen, 10)},
		rpc.WatchParamWait:       {"30s"},
	}
	u := "http://" + addr + rpc.PathAllgatherWatch + "?" + q.Encode()
	for {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		body, err := harness.GetBody(wctx, hc, u)
		cancel()
		if err != nil {
			return time.Time{}, fmt.Errorf("watch on %s: %w", addr, err)
		}
		at := time.Now()
		status, err := watchStatus(body)
		if err != nil {
			return time.Time{}, fmt.Errorf("watch on %s: %w", addr, err)
		}
		if status == rpc.WatchComplete {
			return at, nil
		}
	}
}

// watchStatus returns the status of a watch answer, which the server
// writes first, without decoding the data that follows it.
func watchStatus(body []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var toks [3]json.Token
	for i := range toks {
		t, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("watch answer %.40q: %w", body, err)
		}
		toks[i] = t
	}
	status, ok := toks[2].(string)
	if toks[0] != json.Delim('{') || toks[1] != "status" || !ok {
		return "", fmt.Errorf("watch answer %.40q does not start with its status", body)
	}
	return status, nil
}

// postJSON posts a write with a request id to the node at addr, following
// a redirect to the leader (when hc does not follow it itself).
func postJSON(ctx context.Context, hc *http.Client, addr, path, reqID string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	target := "http://" + addr + path
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(rpc.HeaderRequestID, reqID)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		switch {
		case resp.StatusCode == http.StatusTemporaryRedirect:
			target = resp.Header.Get("Location")
			continue
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
		}
		return json.Unmarshal(data, out)
	}
	return fmt.Errorf("%s: too many redirects", path)
}
