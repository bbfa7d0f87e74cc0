package recordio

import (
	"bufio"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	benchPayload   = 32 << 20 // record bytes per generated file
	benchChunkSize = 1 << 20
)

// writeBenchFile writes about benchPayload bytes of text-like records of 100
// to 2000 bytes and returns the number of records.
func writeBenchFile(b *testing.B, path string, compressor int) int {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	w := NewWriter(bw, benchChunkSize, compressor)
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven trainers read " +
		"records from chunks of files that a master cut into tasks for every pass")
	rng := rand.New(rand.NewPCG(1, 2))
	var rec []byte
	n := 0
	for total := 0; total < benchPayload; n++ {
		rec = rec[:0]
		for size := 100 + rng.IntN(1900); len(rec) < size; {
			rec = append(rec, words[rng.IntN(len(words))]...)
			rec = append(rec, ' ', byte('a'+rng.IntN(26)))
		}
		if _, err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		total += len(rec)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkRead reads a generated file of 32 MiB of records per compressor:
// "baseline" copies the file with bufio and io.Copy, "RangeScanner" and
// "Scanner" read every record. MB/s counts file bytes in each case, so the
// figures compare directly.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	for _, comp := range []int{NoCompression, Snappy, Gzip} {
		name := CompressorName(comp)
		path := filepath.Join(dir, name+".recordio")
		records := writeBenchFile(b, path, comp)
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size := st.Size()
		perSec := func(b *testing.B) {
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		}

		b.Run(name+"/baseline", func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, bufio.NewReaderSize(f, 1<<20)); err != nil || n != size {
					b.Fatal(n, err)
				}
				f.Close()
			}
		})
		b.Run(name+"/RangeScanner", func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				idx, err := LoadIndex(f)
				if err != nil {
					b.Fatal(err)
				}
				s := NewRangeScanner(f, idx, -1, -1)
				n := 0
				for s.Scan() {
					n++
				}
				if s.Err() != nil || n != records {
					b.Fatal(n, s.Err())
				}
				f.Close()
			}
			perSec(b)
		})
		b.Run(name+"/Scanner", func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				s, err := NewScanner(path)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for s.Scan() {
					n++
				}
				if s.Err() != nil || n != records {
					b.Fatal(n, s.Err())
				}
				s.Close()
			}
			perSec(b)
		})
	}
}
