package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmaster/raftmaster/recordio"
)

// defaultMaxChunkSize is the RecordIO writer's default chunk size.
const defaultMaxChunkSize = 32 << 20

// recordioCommand returns the "recordio" command: tools that prepare and
// check the RecordIO files a dataset is made of.
func recordioCommand() *cli.Command {
	return &cli.Command{
		Name:  "recordio",
		Usage: "pack text into RecordIO files and inspect RecordIO files",
		Description: "RecordIO is the chunked record format the master cuts datasets from: each\n" +
			"chunk holds a group of records, optionally compressed with snappy or gzip, and a\n" +
			"task is a list of chunks. The files are byte-compatible with the PaddlePaddle v2\n" +
			"RecordIO package.",
		Subcommands: []*cli.Command{packCommand(), inspectCommand(), indexCommand()},
	}
}

func packCommand() *cli.Command {
	return &cli.Command{
		Name:  "pack",
		Usage: "write newline-delimited records into numbered RecordIO files",
		UsageText: "raftmaster recordio pack --out PATTERN --records-per-file N [--compressor none|snappy|gzip]\n" +
			"       [--max-chunk-size BYTES] [--quiet] [INPUT...]\n\n" +
			"Example:\n" +
			"   raftmaster recordio pack --out data/train-%05d.recordio --records-per-file 100000 train.txt",
		Description: "Each line of the INPUT files (standard input when there is none, or for \"-\") is\n" +
			"one record, without its trailing newline; empty lines are empty records. Every\n" +
			"--records-per-file records start a new file named by PATTERN, a printf-style\n" +
			"pattern with one integer verb that receives the file number from 0 (a pattern\n" +
			"without one gets \"-%05d\" before its extension). Parent directories are created,\n" +
			"each file appears under its name only when complete, and the names are printed\n" +
			"on standard output. Progress goes to standard error. Beside each file goes its\n" +
			"index object, FILE" + recordio.IndexSuffix + " (unless --no-index): copied along with the file into an\n" +
			"object store, it lets the leader index the file with one request.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true,
				Usage: "output file `PATTERN`, e.g. data/train-%05d.recordio"},
			&cli.IntFlag{Name: "records-per-file", Aliases: []string{"n"}, Required: true,
				Usage: "`N` records in each file (the last may hold fewer)"},
			&cli.StringFlag{Name: "compressor", Aliases: []string{"c"}, Value: "snappy",
				Usage: "chunk compression `NAME`: none, snappy or gzip"},
			&cli.IntFlag{Name: "max-chunk-size", Value: defaultMaxChunkSize,
				Usage: "record `BYTES` per chunk before a new chunk starts"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"},
				Usage: "print no progress or summary on standard error"},
			&cli.BoolFlag{Name: "no-index",
				Usage: "write no index object (FILE" + recordio.IndexSuffix + ") beside each file"},
		},
		Action: runPack,
	}
}

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "read and verify RecordIO files and describe them",
		ArgsUsage: "FILE...",
		UsageText: "raftmaster recordio inspect [--json] FILE...\n\n" +
			"Example:\n" +
			"   raftmaster recordio inspect --json data/train-*.recordio",
		Description: "For each file, inspect reads and verifies every chunk (checksums, sizes,\n" +
			"decompression, record framing) and prints its chunk and record counts, the\n" +
			"compressors used, the file size and the compressed and uncompressed chunk data\n" +
			"sizes. A damaged file is reported with its chunk and byte offset, and the\n" +
			"command then exits with a non-zero status; with --json its entry also has an\n" +
			"\"error\" field and counts only the chunks before the damage.",
		Flags:  outputFlags(),
		Action: runInspect,
	}
}

// packOptions are the checked flags of "recordio pack".
type packOptions struct {
	pattern      string
	perFile      int
	compressor   int
	maxChunkSize int
}

func packOptionsFrom(c *cli.Context) (packOptions, error) {
	o := packOptions{perFile: c.Int("records-per-file"), maxChunkSize: c.Int("max-chunk-size")}
	if o.perFile <= 0 {
		return o, fmt.Errorf("--records-per-file must be positive, got %d", o.perFile)
	}
	if o.maxChunkSize <= 0 {
		return o, fmt.Errorf("--max-chunk-size must be positive, got %d", o.maxChunkSize)
	}
	comp, err := recordio.ParseCompressor(c.String("compressor"))
	if err != nil {
		return o, fmt.Errorf("--compressor: unknown compressor %q (want none, snappy or gzip)", c.String("compressor"))
	}
	o.compressor = comp
	if o.pattern, err = outputPattern(c.String("out")); err != nil {
		return o, err
	}
	return o, nil
}

// outputPattern checks a printf-style file name pattern. One without an
// integer verb gets "-%05d" before its extension.
func outputPattern(p string) (string, error) {
	if p == "" {
		return "", errors.New("--out must not be empty")
	}
	verbs := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		i++
		if i < len(p) && p[i] == '%' {
			continue
		}
		for i < len(p) && strings.IndexByte("+-# 0123456789", p[i]) >= 0 {
			i++
		}
		if i == len(p) || strings.IndexByte("dboxX", p[i]) < 0 {
			return "", fmt.Errorf("--out %q: want one integer verb such as %%05d (use %%%% for a literal %%)", p)
		}
		verbs++
	}
	switch verbs {
	case 0:
		ext := filepath.Ext(p)
		return p[:len(p)-len(ext)] + "-%05d" + ext, nil
	case 1:
		return p, nil
	}
	return "", fmt.Errorf("--out %q has %d verbs, want one for the file number", p, verbs)
}

func runPack(c *cli.Context) error {
	opts, err := packOptionsFrom(c)
	if err != nil {
		return err
	}
	inputs := c.Args().Slice()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	prog := newProgress(c.App.ErrWriter, c.Bool("quiet"))
	p := &packer{opts: opts, stdout: c.App.Writer, progress: prog, index: !c.Bool("no-index")}
	for _, in := range inputs {
		if err := p.packInput(in, c.App.Reader); err != nil {
			p.abort()
			return err
		}
	}
	if err := p.closeFile(); err != nil {
		p.abort()
		return err
	}
	prog.summary(p.records, p.bytes, p.files)
	return nil
}

// packer writes records into numbered RecordIO files.
type packer struct {
	opts     packOptions
	stdout   io.Writer
	progress *progress
	index    bool // write each file's index object

	f      *os.File // temporary file of the current output, nil between files
	name   string   // final name of the current output
	bw     *bufio.Writer
	w      *recordio.Writer
	inFile int // records in the current output

	files   int // files completed
	records int64
	bytes   int64
}

func (p *packer) packInput(name string, stdin io.Reader) error {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	} else if r == nil {
		r = os.Stdin
	}
	if err := eachLine(r, p.add); err != nil {
		if name == "-" {
			name = "standard input"
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// eachLine calls fn with each newline-terminated line of r, without the
// newline, and with the last line if it has none. The slice is reused.
func eachLine(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, line...)
			continue
		}
		if len(long) > 0 {
			long = append(long, line...)
			line, long = long, long[:0]
		}
		if err == io.EOF {
			if len(line) > 0 {
				return fn(line)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(line[:len(line)-1]); err != nil {
			return err
		}
	}
}

func (p *packer) add(rec []byte) error {
	if p.f == nil {
		if err := p.openFile(); err != nil {
			return err
		}
	}
	if _, err := p.w.Write(rec); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.inFile++
	p.records++
	p.bytes += int64(len(rec))
	if p.inFile == p.opts.perFile {
		if err := p.closeFile(); err != nil {
			return err
		}
	}
	p.progress.tick(p.records, p.bytes, p.files)
	return nil
}

// openFile starts the next output, as a temporary file beside it.
func (p *packer) openFile() error {
	p.name = fmt.Sprintf(p.opts.pattern, p.files)
	dir, base := filepath.Split(p.name)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	p.f, p.inFile = f, 0
	p.bw = bufio.NewWriterSize(f, 1<<20)
	p.w = recordio.NewWriter(p.bw, p.opts.maxChunkSize, p.opts.compressor)
	return nil
}

// closeFile completes the current output, if any, and prints its name.
func (p *packer) closeFile() error {
	if p.f == nil {
		return nil
	}
	err := p.w.Close()
	if err == nil {
		err = p.bw.Flush()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p.f.Name(), p.name)
	}
	if err != nil {
		os.Remove(p.f.Name())
		p.f = nil
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.f = nil
	if p.index {
		if _, err := recordio.WriteIndexObjectFile(p.name); err != nil {
			return fmt.Errorf("%s: index object: %w", p.name, err)
		}
	}
	p.files++
	fmt.Fprintln(p.stdout, p.name)
	return nil
}

// abort removes the incomplete output, if any.
func (p *packer) abort() {
	if p.f != nil {
		p.f.Close()
		os.Remove(p.f.Name())
		p.f = nil
	}
}

// progress reports packing progress on standard error at most once a
// second, so only long runs print any, and then a summary.
type progress struct {
	w     io.Writer
	quiet bool
	now   func() time.Time
	start time.Time
	last  time.Time
	calls int
}

// progressCheckEvery is how many records pass between looks at the clock.
const progressCheckEvery = 1024

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w, quiet: quiet, now: time.Now}
	p.start = p.now()
	p.last = p.start
	return p
}

func (p *progress) tick(records, bytes int64, files int) {
	if p.quiet {
		return
	}
	if p.calls++; p.calls%progressCheckEvery != 0 {
		return
	}
	now := p.now()
	if now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	elapsed := now.Sub(p.start).Seconds()
	fmt.Fprintf(p.w, "packed %d records (%s) into %d files so far, %.0f records/s\n",
		records, humanBytes(bytes), files, float64(records)/elapsed)
}

func (p *progress) summary(records, bytes int64, files int) {
	if p.quiet {
		return
	}
	fmt.Fprintf(p.w, "packed %d records (%s) into %d files in %s\n",
		records, humanBytes(bytes), files, p.now().Sub(p.start).Round(time.Millisecond))
}

// humanBytes formats a size in bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// fileReport describes one inspected file.
type fileReport struct {
	File              string   `json:"file"`
	Chunks            int      `json:"chunks"`
	Records           int      `json:"records"`
	Compressors       []string `json:"compressors"`
	FileSize          int64    `json:"file_size"`
	CompressedBytes   int64    `json:"compressed_bytes"`
	UncompressedBytes int64    `json:"uncompressed_bytes"`
	RecordBytes       int64    `json:"record_bytes"`
	Error             string   `json:"error,omitempty"`
}

func runInspect(c *cli.Context) error {
	files := c.Args().Slice()
	if len(files) == 0 {
		return errors.New("inspect needs at least one FILE")
	}
	reports := make([]fileReport, 0, len(files))
	var errs []error
	for _, path := range files {
		rep, err := inspectFile(path)
		if err != nil {
			rep.Error = err.Error()
			errs = append(errs, err)
		}
		reports = append(reports, rep)
	}
	asJSON, err := wantJSON(c)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		err = enc.Encode(reports)
	} else {
		err = printInspectTable(c.App.Writer, reports)
	}
	return errors.Join(append(errs, err)...)
}

func inspectFile(path string) (fileReport, error) {
	rep := fileReport{File: path, Compressors: []string{}}
	f, err := os.Open(path)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return rep, err
	}
	rep.FileSize = st.Size()
	infos, err := recordio.Inspect(f)
	var ce *recordio.ChunkError
	if errors.As(err, &ce) && ce.Path == "" {
		ce.Path = path
	}
	for _, in := range infos {
		rep.Chunks++
		rep.Records += in.NumRecords
		rep.CompressedBytes += in.CompressedSize
		rep.UncompressedBytes += in.UncompressedSize
		rep.RecordBytes += in.RecordBytes
		if name := recordio.CompressorName(in.Compressor); !slices.Contains(rep.Compressors, name) {
			rep.Compressors = append(rep.Compressors, name)
		}
	}
	slices.Sort(rep.Compressors)
	return rep, err
}

// printInspectTable prints the files that were read in full as an aligned
// table, with a total row for several files.
func printInspectTable(w io.Writer, reports []fileReport) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tCHUNKS\tRECORDS\tCOMPRESSOR\tFILE SIZE\tCOMPRESSED\tUNCOMPRESSED")
	var total fileReport
	rows := 0
	for _, r := range reports {
		if r.Error != "" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%d\n", r.File, r.Chunks, r.Records,
			strings.Join(r.Compressors, ","), r.FileSize, r.CompressedBytes, r.UncompressedBytes)
		total.Chunks += r.Chunks
		total.Records += r.Records
		total.FileSize += r.FileSize
		total.CompressedBytes += r.CompressedBytes
		total.UncompressedBytes += r.UncompressedBytes
		rows++
	}
	if rows > 1 {
		fmt.Fprintf(tw, "TOTAL (%d files)\t%d\t%d\t\t%d\t%d\t%d\n", rows, total.Chunks, total.Records,
			total.FileSize, total.CompressedBytes, total.UncompressedBytes)
	}
	return tw.Flush()
}
