package dataset

import "github.com/raftmaster/raftmaster/fsm"

// Default limits, used for zero fields of Limits.
const (
	DefaultMaxGlobs    = 64
	DefaultMaxFiles    = 100000
	DefaultMaxChunks   = fsm.MaxChunks
	DefaultParallelism = 8
)

// Limits bound the work of one Index call. A zero field takes its default.
type Limits struct {
	// MaxGlobs bounds the number of patterns.
	MaxGlobs int
	// MaxFiles bounds the number of distinct files the patterns match.
	MaxFiles int
	// MaxChunks bounds the number of chunks of all files together.
	MaxChunks int
	// Parallelism is how many files are indexed at once.
	Parallelism int
}

func (l Limits) withDefaults() Limits {
	if l.MaxGlobs <= 0 {
		l.MaxGlobs = DefaultMaxGlobs
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxChunks <= 0 || l.MaxChunks > fsm.MaxChunks {
		l.MaxChunks = DefaultMaxChunks
	}
	if l.Parallelism <= 0 {
		l.Parallelism = DefaultParallelism
	}
	return l
}
