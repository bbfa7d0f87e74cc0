package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
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
	// Completion is the last join's acknowledgement → the last member's
	// complete result.
	Completion measure.Summary `json:"completion_ms"`
	// Joins is the first join sent → the last join acknowledged.
	Joins measure.Summary `json:"joins_ms"`
	Error string          `json:"error,omitempty"`
}

// AllgatherRun is one group.
type AllgatherRun struct {
	JoinsMs      float64 `json:"joins_ms"`
	CompletionMs float64 `json:"completion_ms"`
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
			r, err := s.allgatherRun(ctx, c, n, fmt.Sprintf("bench-%d-%d-%s", n, run, uuid.NewString()[:8]))
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				row.Error = firstLine(err.Error())
				s.logf("allgather %d peers: %v\n%s", n, err, c.LogTail())
				break
			}
			row.Runs = append(row.Runs, r)
			s.logf("allgather %-5d peers run %d/%d: joins took %7.0f ms, last join → last result %7.1f ms", n, run+1, s.cfg.Runs, r.JoinsMs, r.CompletionMs)
		}
		row.Completion = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.CompletionMs }))
		row.Joins = measure.Of(collect(row.Runs, func(r AllgatherRun) float64 { return r.JoinsMs }))
		out.Rows = append(out.Rows, row)
	}
	return nil
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
	var lastJoin, lastResult time.Time
	for i := range n {
		if errs[i] != nil {
			return AllgatherRun{}, errs[i]
		}
		if acked[i].After(lastJoin) {
			lastJoin = acked[i]
		}
		if done[i].After(lastResult) {
			lastResult = done[i]
		}
	}
	return AllgatherRun{JoinsMs: measure.Millis(lastJoin.Sub(start)), CompletionMs: measure.Millis(lastResult.Sub(lastJoin))}, nil
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
