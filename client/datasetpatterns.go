package client

import (
	"cmp"
	"slices"

	"github.com/raftmaster/raftmaster/rpc"
)

// warnOtherPatterns logs a warning when resp says that the job's dataset
// was set with other patterns than globs, the ones this call gave: the job
// reads the first dataset's files, and this call changed nothing. A
// cluster that does not know the dataset's patterns (one below protocol
// level 4, or a dataset given as chunks) answers none, and nothing is
// logged.
func (c *Client) warnOtherPatterns(globs []string, resp rpc.SetDatasetResponse) {
	if !resp.Ignored || len(resp.CurrentPatterns) == 0 || samePatterns(globs, resp.CurrentPatterns) {
		return
	}
	c.logger.Warn("the job's dataset was set with other patterns; the job reads those files, and this SetDataset changed nothing",
		"job", cmp.Or(c.job, rpc.DefaultJob), "requested", globs, "current", resp.CurrentPatterns)
}

// samePatterns reports whether a and b hold the same patterns, in any
// order: the leader indexes the files they match in sorted order, without
// duplicates, so the order of the patterns changes nothing.
func samePatterns(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
