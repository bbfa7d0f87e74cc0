package httpapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// globSet is one list of globs a dataset request has indexed: its Globs,
// or one source's.
type globSet struct {
	// source names the source of the globs, "" for a request's Globs.
	source string
	globs  []string
	// objects is true for object-store patterns, false for local ones.
	objects bool
}

// globSets returns the lists of globs of a request that checkDatasetSource
// accepted: one per source, or its Globs, or none for a chunk list. Each
// list's patterns are all local or all in object stores; a mixture's
// sources may differ.
func globSets(in rpc.SetDatasetRequest) ([]globSet, error) {
	if len(in.Sources) == 0 {
		if len(in.Globs) == 0 {
			return nil, nil
		}
		objects, err := objectPatterns(in.Globs)
		if err != nil {
			return nil, err
		}
		return []globSet{{globs: in.Globs, objects: objects}}, nil
	}
	sets := make([]globSet, len(in.Sources))
	for k, src := range in.Sources {
		objects, err := objectPatterns(src.Globs)
		if err != nil {
			return nil, inSource(src.Name, err)
		}
		sets[k] = globSet{source: src.Name, globs: src.Globs, objects: objects}
	}
	return sets, nil
}

// inSource returns err, an answer of the globs of source name, with the
// source named in its message; err itself for no name.
func inSource(name string, err error) error {
	if name == "" {
		return err
	}
	return prefixed(fmt.Sprintf("source %q", name), err)
}

// prefixed returns err, when it is an answer (an *rpc.Error), with its
// message after "prefix: ".
func prefixed(prefix string, err error) error {
	e, ok := errors.AsType[*rpc.Error](err)
	if !ok {
		return err
	}
	c := *e
	c.Message = prefix + ": " + e.Message
	return &c
}

// expandGlobs expands, or lists, the globs of g within lim, without
// indexing anything: a pattern outside the dataset root or the allowed
// buckets, or patterns that match nothing at all, are refused.
func (s *Handler) expandGlobs(ctx context.Context, g globSet, lim recordio.IndexLimits) error {
	if g.objects {
		_, err := s.objectFiles(ctx, g.globs, lim)
		return inSource(g.source, err)
	}
	err := s.withDatasetRoot(g.globs, func(root recordio.Dir, globs []string) error {
		_, err := s.datasetFiles(ctx, root, globs, lim)
		return err
	})
	return inSource(g.source, err)
}

// indexGlobs expands and indexes the globs of g within lim into chunks,
// and counts the files that hold them.
func (s *Handler) indexGlobs(ctx context.Context, g globSet, lim recordio.IndexLimits) ([]fsm.Chunk, int, error) {
	if g.objects {
		chunks, files, err := s.indexObjects(ctx, g.globs, lim)
		return chunks, files, inSource(g.source, err)
	}
	start := time.Now()
	var chunks []fsm.Chunk
	var sum recordio.IndexSummary
	err := s.withDatasetRoot(g.globs, func(root recordio.Dir, globs []string) error {
		names, err := s.datasetFiles(ctx, root, globs, lim)
		if err != nil {
			return err
		}
		// The chunks of a file come together: its path is made once.
		var name, path string
		chunks, sum, err = recordio.IndexRootFunc(ctx, root, names, lim, func(n string, offset int64, records uint32) fsm.Chunk {
			if n != name || path == "" {
				name, path = n, chunkPath(root, n)
			}
			return fsm.Chunk{Path: path, Offset: offset, Records: records}
		})
		if err != nil {
			return datasetError(err, root)
		}
		return nil
	})
	if err != nil {
		return nil, 0, inSource(g.source, err)
	}
	args := []any{"files", sum.Files, "chunks", sum.Chunks, "records", sum.Records, "duration", time.Since(start)}
	if g.source != "" {
		args = append([]any{"source", g.source}, args...)
	}
	s.log.Info("indexed dataset", args...)
	return chunks, sum.Files, nil
}

// checkSources checks the sources of a mixture before anything is read:
// 1 to fsm.MaxSources of valid, distinct names, each with globs and a
// weight (fsm.WeightUnits), not every weight 0, and the globs of all of
// them within the limits of a request's globs (checkGlobs).
func (s *Handler) checkSources(sources []rpc.SourceSpec) error {
	if len(sources) > fsm.MaxSources {
		return invalidf("%d sources, at most %d", len(sources), fsm.MaxSources)
	}
	var globs []string
	weighted := false
	for k, src := range sources {
		if err := fsm.ValidateSourceName(src.Name); err != nil {
			return invalidf("source %d: %s", k, invalidFromFSM(err).Message)
		}
		if slices.ContainsFunc(sources[:k], func(o rpc.SourceSpec) bool { return o.Name == src.Name }) {
			return invalidf("source %q is named twice", src.Name)
		}
		w, err := fsm.WeightUnits(src.Weight)
		if err != nil {
			return invalidf("source %q: %s", src.Name, invalidFromFSM(err).Message)
		}
		weighted = weighted || w > 0
		if len(src.Globs) == 0 {
			return invalidf("source %q has no globs", src.Name)
		}
		globs = append(globs, src.Globs...)
	}
	if !weighted {
		return invalidf("every source has weight 0: give at least one a weight above 0")
	}
	return s.checkGlobs(globs)
}

// mixtureAllowed refuses a mixture, with fsm.ErrUpgradePending
// (unavailable), below fsm.Protocol9: replicas of earlier releases would
// refuse its dataset.
func (s *Handler) mixtureAllowed() error {
	if level := s.b.FSM().Protocol(); level < fsm.Protocol9 {
		return fmt.Errorf("%w: a dataset of sources and its weights need protocol level %d, and the cluster is at %d "+
			"until every node runs a release that knows it", fsm.ErrUpgradePending, fsm.Protocol9, level)
	}
	return nil
}

// indexSources indexes each source's globs apart (sets, from globSets),
// within lim each, and returns their chunks one source after the other,
// the files that hold them, and the sources the dataset records. The
// sources together stay within lim's files and chunks, as one request's
// globs do.
func (s *Handler) indexSources(ctx context.Context, sources []rpc.SourceSpec, sets []globSet,
	lim recordio.IndexLimits) ([]fsm.Chunk, int, []fsm.Source, error) {
	var chunks []fsm.Chunk
	out := make([]fsm.Source, len(sources))
	for k, src := range sources {
		found, _, err := s.indexGlobs(ctx, sets[k], lim)
		if err != nil {
			return nil, 0, nil, err
		}
		if len(chunks)+len(found) > lim.MaxChunks {
			return nil, 0, nil, invalidf("the sources have more than %d chunks together (source %q reaches %d)",
				lim.MaxChunks, src.Name, len(chunks)+len(found))
		}
		w, err := fsm.WeightUnits(src.Weight) // checked by checkSources
		if err != nil {
			return nil, 0, nil, invalidFromFSM(err)
		}
		out[k] = fsm.Source{Name: src.Name, Weight: w, Chunks: len(found), Patterns: src.Globs}
		chunks = append(chunks, found...)
	}
	files := map[string]struct{}{}
	for _, c := range chunks {
		files[c.Path] = struct{}{}
	}
	if len(files) > lim.MaxFiles {
		return nil, 0, nil, invalidf("the sources match %d files together, at most %d", len(files), lim.MaxFiles)
	}
	return chunks, len(files), out, nil
}

// handleSetWeights changes the weights of the job's mixture, and its
// schedule of weights to come, in one SetWeights entry. The request is
// checked first; then, after a read barrier, against the job: it must
// have a dataset of sources, which name every source the request names.
// Those are what a retry of a request that applied still meets. Whether
// the weights would then all be 0 depends on the weights in place, which
// a retry may find changed: the state machine, which answers a retry with
// its first outcome, judges it, refusing it as invalid. The answer
// describes the sources after the change.
func (s *Handler) handleSetWeights(w http.ResponseWriter, r *http.Request) error {
	var in rpc.SetWeightsRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	c, err := weightsCommand(in)
	if err != nil {
		return err
	}
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	if err := s.mixtureAllowed(); err != nil {
		return err
	}
	job := jobOf(r)
	if err := checkWeightsOf(s.b.FSM().Stats(job), c); err != nil {
		return err
	}
	if _, err := s.apply(r, req, c); err != nil {
		return err
	}
	st := s.b.FSM().Stats(job)
	writeJSON(w, http.StatusOK, rpc.SetWeightsResponse{Sources: SourcesFromFSM(st.Sources), Schedule: ScheduleFromFSM(st.Schedule)})
	return nil
}

// weightsCommand checks a weight change on its own and returns its
// command: the weights sorted by name, each step's too, so that a request
// has one entry whatever the order of its maps.
func weightsCommand(in rpc.SetWeightsRequest) (*fsm.SetWeights, error) {
	switch {
	case len(in.Weights) == 0 && !in.ReplaceSchedule:
		return nil, invalidf("no weights: give weights by source name, or replace_schedule true with the schedule to come (none clears it)")
	case len(in.Schedule) > 0 && !in.ReplaceSchedule:
		return nil, invalidf("a schedule replaces the one in place: send replace_schedule true with it")
	case len(in.Schedule) > fsm.MaxScheduleSteps:
		return nil, invalidf("%d schedule steps, at most %d", len(in.Schedule), fsm.MaxScheduleSteps)
	}
	ws, err := sourceWeights(in.Weights)
	if err != nil {
		return nil, err
	}
	c := &fsm.SetWeights{Weights: ws, ReplaceSchedule: in.ReplaceSchedule}
	for k, step := range in.Schedule {
		switch {
		case step.AtRecords < 0:
			return nil, invalidf("schedule step %d: negative at_records %d", k, step.AtRecords)
		case k > 0 && step.AtRecords <= in.Schedule[k-1].AtRecords:
			return nil, invalidf("schedule step %d: at_records %d is not after the step before's (%d): steps are in increasing at_records",
				k, step.AtRecords, in.Schedule[k-1].AtRecords)
		case len(step.Weights) == 0:
			return nil, invalidf("schedule step %d names no weight", k)
		}
		sw, err := sourceWeights(step.Weights)
		if err != nil {
			return nil, prefixed(fmt.Sprintf("schedule step %d", k), err)
		}
		c.Schedule = append(c.Schedule, fsm.WeightStep{AtRecords: step.AtRecords, Weights: sw})
	}
	return c, nil
}

// sourceWeights converts weights by source name into millionths, sorted
// by name.
func sourceWeights(m map[string]float64) ([]fsm.SourceWeight, error) {
	if len(m) > fsm.MaxSources {
		return nil, invalidf("%d weights, and a mixture has at most %d sources", len(m), fsm.MaxSources)
	}
	out := make([]fsm.SourceWeight, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if err := fsm.ValidateSourceName(name); err != nil {
			return nil, invalidFromFSM(err)
		}
		u, err := fsm.WeightUnits(m[name])
		if err != nil {
			return nil, invalidf("source %q: %s", name, invalidFromFSM(err).Message)
		}
		out = append(out, fsm.SourceWeight{Name: name, Weight: u})
	}
	return out, nil
}

// checkWeightsOf checks c against the job st describes: a dataset of
// sources, every source c names among them, and no list of weights that
// names every source with 0.
func checkWeightsOf(st fsm.Stats, c *fsm.SetWeights) error {
	if !st.HasDataset {
		return rpc.Errorf(rpc.CodeNoDataset, "job %q has no dataset: set one with sources first", st.Job)
	}
	if len(st.Sources) == 0 {
		return invalidf("job %q has one source: its dataset was not set with sources, and has no weights to change", st.Job)
	}
	names := make([]string, len(st.Sources))
	for k, src := range st.Sources {
		names[k] = src.Name
	}
	check := func(ws []fsm.SourceWeight) error {
		zero := 0
		for _, w := range ws {
			if !slices.Contains(names, w.Name) {
				return invalidf("job %q has no source %q (its sources: %s)", st.Job, w.Name, strings.Join(names, ", "))
			}
			if w.Weight == 0 {
				zero++
			}
		}
		if zero == len(names) {
			return invalidf("every source of job %q would have weight 0: give at least one a weight above 0", st.Job)
		}
		return nil
	}
	if err := check(c.Weights); err != nil {
		return err
	}
	for k, step := range c.Schedule {
		if err := check(step.Weights); err != nil {
			return prefixed(fmt.Sprintf("schedule step %d", k), err)
		}
	}
	return nil
}
