package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/etcdmember"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/raftmaster/raftmaster/store/etcdkeys"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// GrowthResults is dispatch throughput against the dataset's size.
type GrowthResults struct {
	Concurrency int         `json:"concurrency"`
	Rows        []GrowthRow `json:"rows"`
}

// GrowthRow is one dataset size on both backends.
type GrowthRow struct {
	Tasks int        `json:"tasks"`
	Raft  GrowthCell `json:"raft"`
	Etcd  GrowthCell `json:"etcd"`
}

// GrowthCell is one backend at one dataset size.
type GrowthCell struct {
	Series
	// SetDatasetSeconds is how long setting the dataset took (the leader
	// indexes the file and logs or saves the task list).
	SetDatasetSeconds float64 `json:"set_dataset_seconds,omitempty"`
	// Status is "ok", or what stopped the backend at this size, with the
	// error code when the API gave one (such as too_large).
	Status string `json:"status"`
	// StateBytes is, for the etcd backend, the size of the saved state (the
	// gzipped FSM snapshot that every change rewrites) after the runs.
	StateBytes int `json:"state_bytes,omitempty"`
	// StateRawBytes is that state before compression.
	StateRawBytes int64 `json:"state_raw_bytes,omitempty"`
}

func (s *suite) growth(ctx context.Context, res *Results) error {
	cfg := s.cfg
	out := &GrowthResults{Concurrency: cfg.GrowthConcurrency}
	res.Growth = out
	for _, n := range cfg.Sizes {
		row := GrowthRow{Tasks: n}
		if err := s.growthSize(ctx, &row); err != nil {
			return err
		}
		out.Rows = append(out.Rows, row)
	}
	return nil
}

// growthSize measures one dataset size on fresh clusters of both backends,
// taking turns run by run.
func (s *suite) growthSize(ctx context.Context, row *GrowthRow) error {
	cfg := s.cfg
	n := row.Tasks
	path, err := s.dataset(n)
	if err != nil {
		return err
	}
	base := s.dir("growth", fmt.Sprint(n))
	defer os.RemoveAll(base)

	raft, err := harness.StartRaft(ctx, s.bin, s.dir("growth", fmt.Sprint(n), "raft"), 3)
	if err != nil {
		return err
	}
	defer raft.Stop()
	d, err := raft.SetDataset(path, time.Hour, 10*time.Minute)
	row.Raft.SetDatasetSeconds = d.Seconds()
	row.Raft.Status = status(err)
	if err != nil {
		row.Raft.fail(err)
	}
	s.logf("growth %d tasks: raft backend set the dataset in %s: %s", n, d.Round(time.Millisecond), row.Raft.Status)

	row.Etcd.Status = "not run"
	var etcdBackend *harness.Cluster
	etcd, err := etcdmember.Start(ctx, s.exe, s.dir("growth", fmt.Sprint(n), "etcd"), 3, cfg.EtcdCompaction)
	if err != nil {
		etcd = nil
		row.Etcd.fail(err)
		row.Etcd.Status = "etcd did not start: " + firstLine(err.Error())
	} else {
		defer etcd.Stop()
		etcdBackend, err = harness.StartEtcdBackend(ctx, s.bin, s.dir("growth", fmt.Sprint(n), "masters"), etcd.Endpoints, etcdPrefix, 3, cfg.EtcdTTL)
		if err != nil {
			row.Etcd.fail(err)
			row.Etcd.Status = "masters did not start: " + firstLine(err.Error())
		} else {
			defer etcdBackend.Stop()
			d, err := etcdBackend.SetDataset(path, time.Hour, 10*time.Minute)
			row.Etcd.SetDatasetSeconds = d.Seconds()
			row.Etcd.Status = status(err)
			if err != nil {
				row.Etcd.fail(err)
			}
			s.logf("growth %d tasks: etcd backend set the dataset in %s: %s", n, d.Round(time.Millisecond), row.Etcd.Status)
		}
	}

	if etcd != nil {
		defer func() {
			row.Etcd.StateBytes, row.Etcd.StateRawBytes = stateSize(ctx, etcd.Endpoints, etcdkeys.Under(etcdPrefix).State)
		}()
	}
	var raftTrainers, etcdTrainers harness.Dispatch
	for run := range cfg.Runs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if row.Raft.Error == "" {
			r, err := s.dispatchRaftmaster(ctx, raft, cfg.GrowthConcurrency, &raftTrainers)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				row.Raft.fail(err)
				row.Raft.Status = status(err)
				s.logf("growth %d tasks: raft backend: %v\n%s", n, err, raft.LogTail())
			} else {
				row.Raft.add(r)
				s.logf("growth %-8d run %d/%d  raft backend %8.0f writes/s  p50 %7.2f ms  p99 %7.2f ms", n, run+1, cfg.Runs, r.OpsPerSec, r.P50, r.P99)
			}
		}
		if etcdBackend != nil && row.Etcd.Error == "" {
			r, err := s.dispatchRaftmaster(ctx, etcdBackend, cfg.GrowthConcurrency, &etcdTrainers)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				row.Etcd.fail(err)
				row.Etcd.Status = status(err)
				s.logf("growth %d tasks: etcd backend: %v\n%s", n, err, etcdBackend.LogTail())
			} else {
				row.Etcd.add(r)
				s.logf("growth %-8d run %d/%d  etcd backend %8.0f writes/s  p50 %7.2f ms  p99 %7.2f ms", n, run+1, cfg.Runs, r.OpsPerSec, r.P50, r.P99)
			}
		}
	}
	return nil
}

// status is "ok" for nil, the API's error code and message for an API
// error, or the error's first line.
func status(err error) string {
	if err == nil {
		return "ok"
	}
	var re *rpc.Error
	if errors.As(err, &re) {
		return re.Code + ": " + firstLine(re.Message)
	}
	return firstLine(err.Error())
}

// stateSize is the size of the gzipped value at key, and its size
// uncompressed; zeros when it cannot be read.
func stateSize(ctx context.Context, endpoints []string, key string) (int, int64) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return 0, 0
	}
	v := resp.Kvs[0].Value
	zr, err := gzip.NewReader(bytes.NewReader(v))
	if err != nil {
		return len(v), 0
	}
	raw, _ := io.Copy(io.Discard, zr)
	return len(v), raw
}
