package recordio

// Default limits of IndexGlobs and IndexFiles, used for zero fields of
// IndexLimits.
const (
	DefaultMaxGlobs    = 64
	DefaultMaxFiles    = 100000
	DefaultMaxChunks   = 1 << 26
	DefaultMaxPathLen  = 4096
	DefaultParallelism = 8
)

// IndexLimits bound the work of one IndexGlobs or IndexFiles call. A zero
// field takes its default.
type IndexLimits struct {
	// MaxGlobs bounds the number of patterns.
	MaxGlobs int
	// MaxFiles bounds the number of distinct files the patterns match.
	MaxFiles int
	// MaxChunks bounds the number of chunks of all files together.
	MaxChunks int
	// MaxPathLen bounds a pattern and a matched path, in bytes.
	MaxPathLen int
	// Parallelism is how many files are indexed at once.
	Parallelism int
}

// WithDefaults returns l with each limit that is not positive set to
// its default.
func (l IndexLimits) WithDefaults() IndexLimits {
	if l.MaxGlobs <= 0 {
		l.MaxGlobs = DefaultMaxGlobs
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxChunks <= 0 {
		l.MaxChunks = DefaultMaxChunks
	}
	if l.MaxPathLen <= 0 {
		l.MaxPathLen = DefaultMaxPathLen
	}
	if l.Parallelism <= 0 {
		l.Parallelism = DefaultParallelism
	}
	return l
}
