package client

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"

	"github.com/raftmaster/raftmaster/rpc"
)

// Source is one source of a weighted mixture (DatasetParams.Sources).
type Source struct {
	// Name names the source in weights, schedules and Task.Source: 1 to
	// 64 letters, digits, '_', '-' or '.', distinct within the dataset.
	Name string
	// Weight is the source's weight, relative to the others': 0.5, 0.3
	// and 0.2 mix as 5, 3 and 2 do. It is at most 4000, counted in
	// millionths; a source of weight 0 is not read until its weight
	// changes, and at least one source weighs more than 0.
	Weight float64
	// Patterns are the globs of the source's RecordIO files, as
	// SetDataset takes them (s3:// and gs:// included); the leader
	// indexes them.
	Patterns []string
}

// SourceStatus describes one source of a mixture: its weight, its own
// pass, its tasks by queue, and the records and tasks of its finished
// tasks in every pass.
type SourceStatus = rpc.SourceStatus

// WeightStep is one step of a weight schedule: once the job's records
// consumed (the records of its finished tasks, in every pass) reach
// AtRecords, the sources named in Weights take those weights, and the
// others keep theirs.
type WeightStep = rpc.WeightStep

// checkSources checks sources given to SetDataset: each named, once, with
// a finite weight of at least 0 and at least one pattern. The cluster
// checks the rest (the name's characters, the weights' bounds).
func checkSources(sources []Source) error {
	seen := make(map[string]bool, len(sources))
	for i, s := range sources {
		if s.Name == "" {
			return fmt.Errorf("%w: source %d has no name", ErrInvalid, i)
		}
		if seen[s.Name] {
			return fmt.Errorf("%w: source %q is named twice", ErrInvalid, s.Name)
		}
		seen[s.Name] = true
		if err := checkWeight(s.Name, s.Weight); err != nil {
			return err
		}
		if len(s.Patterns) == 0 {
			return fmt.Errorf("%w: source %q has no pattern", ErrInvalid, s.Name)
		}
		for _, p := range s.Patterns {
			if p == "" {
				return fmt.Errorf("%w: source %q has an empty pattern", ErrInvalid, s.Name)
			}
		}
	}
	return nil
}

// checkWeight checks the weight w of the source name: a finite number of
// at least 0 (JSON has no NaN or infinity).
func checkWeight(name string, w float64) error {
	if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return fmt.Errorf("%w: source %q: weight %v is not a number of at least 0", ErrInvalid, name, w)
	}
	return nil
}

// checkWeights checks a map of weights by source name.
func checkWeights(weights map[string]float64) error {
	for name, w := range weights {
		if name == "" {
			return fmt.Errorf("%w: a weight without a source name", ErrInvalid)
		}
		if err := checkWeight(name, w); err != nil {
			return err
		}
	}
	return nil
}

// sourceSpecs returns sources as the wire has them, and their patterns,
// in order.
func sourceSpecs(sources []Source) ([]rpc.SourceSpec, []string) {
	specs := make([]rpc.SourceSpec, len(sources))
	var patterns []string
	for i, s := range sources {
		specs[i] = rpc.SourceSpec{Name: s.Name, Weight: s.Weight, Globs: s.Patterns}
		patterns = append(patterns, s.Patterns...)
	}
	return specs, patterns
}

// SetWeights changes the weights of the client's job's mixture
// (WithJob): the sources named take these weights from the next task
// handed out, for every trainer at once, and the others keep theirs. The
// shares count afresh from the change: the new weights hold from then on,
// and the past is not paid back. It returns the sources afterwards, with
// the schedule. It is retried with one request id, so it is applied at
// most once. A source the mixture does not have, a weight out of range,
// or a job whose dataset is not a mixture is ErrInvalid, and nothing
// changes; ErrNoDataset while the job has no dataset. A cluster below
// protocol level 9 does not serve it.
func (c *Client) SetWeights(ctx context.Context, weights map[string]float64) (rpc.SetWeightsResponse, error) {
	if len(weights) == 0 {
		return rpc.SetWeightsResponse{}, fmt.Errorf("%w: SetWeights: no weight given", ErrInvalid)
	}
	if err := checkWeights(weights); err != nil {
		return rpc.SetWeightsResponse{}, err
	}
	return c.setWeights(ctx, rpc.SetWeightsRequest{Weights: weights})
}

// SetWeightSchedule replaces the weight schedule of the client's job's
// mixture (WithJob) with steps, in increasing AtRecords: once the job's
// records consumed reach a step's AtRecords, at the task finish that
// reaches it, the sources the step names take its weights, as SetWeights
// would. A step already reached takes effect at once. Nil (or no step)
// clears the schedule. It returns the sources afterwards, with the steps
// not yet reached. It is retried with one request id, so it is applied at
// most once; steps out of order, or naming a source the mixture does not
// have, are ErrInvalid, and nothing changes.
func (c *Client) SetWeightSchedule(ctx context.Context, steps []WeightStep) (rpc.SetWeightsResponse, error) {
	for i, s := range steps {
		if s.AtRecords < 0 {
			return rpc.SetWeightsResponse{}, fmt.Errorf("%w: schedule step %d: negative record count %d", ErrInvalid, i, s.AtRecords)
		}
		if i > 0 && s.AtRecords <= steps[i-1].AtRecords {
			return rpc.SetWeightsResponse{}, fmt.Errorf("%w: schedule step %d: at %d records, not after the step before (%d)",
				ErrInvalid, i, s.AtRecords, steps[i-1].AtRecords)
		}
		if len(s.Weights) == 0 {
			return rpc.SetWeightsResponse{}, fmt.Errorf("%w: schedule step %d names no weight", ErrInvalid, i)
		}
		if err := checkWeights(s.Weights); err != nil {
			return rpc.SetWeightsResponse{}, fmt.Errorf("schedule step %d: %w", i, err)
		}
	}
	return c.setWeights(ctx, rpc.SetWeightsRequest{ReplaceSchedule: true, Schedule: steps})
}

// setWeights sends req to the client's job.
func (c *Client) setWeights(ctx context.Context, req rpc.SetWeightsRequest) (rpc.SetWeightsResponse, error) {
	var resp rpc.SetWeightsResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: c.jobPath(rpc.PathWeights), body: req, write: true, out: &resp})
	return resp, err
}

// jobPath is path, a job-scoped endpoint's, under the client's job
// (WithJob): itself for the default job.
func (c *Client) jobPath(path string) string {
	if c.job == "" {
		return path
	}
	return rpc.JobPath(url.PathEscape(c.job), path)
}
