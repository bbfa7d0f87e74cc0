package recordio

import (
	"bytes"
	"errors"
	"testing"
)

func TestWriterDefaults(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, -1, -1)
	for range 100 {
		if _, err := w.Write(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	infos, err := Inspect(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Compressor != Snappy || infos[0].NumRecords != 100 ||
		infos[0].RecordBytes != 100*1000 || infos[0].UncompressedSize != 100*1004 {
		t.Fatalf("default writer made %+v, want one snappy chunk of 100 records", infos)
	}
}

func TestWriterClose(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 10, NoCompression)
	if _, err := w.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.Write([]byte("b")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if buf.Len() != headerSize+5 {
		t.Fatalf("wrote %d bytes, want %d", buf.Len(), headerSize+5)
	}

	var empty bytes.Buffer
	if err := NewWriter(&empty, -1, Gzip).Close(); err != nil || empty.Len() != 0 {
		t.Fatalf("Close of an empty Writer: %v, %d bytes", err, empty.Len())
	}
}

func TestWriterUnknownCompressor(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, -1, 7)
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write with compressor 7 succeeded")
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close with compressor 7 succeeded")
	}
}

func TestWriterCopiesRecords(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, -1, NoCompression)
	rec := []byte("hello")
	w.Write(rec)
	copy(rec, "HELLO")
	w.Write(rec)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readAllRecords(t, buf.Bytes())
	if string(recs[0]) != "hello" || string(recs[1]) != "HELLO" {
		t.Fatalf("read %q", recs)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriterErrorIsSticky(t *testing.T) {
	w := NewWriter(&failWriter{n: 0}, 1, NoCompression)
	w.Write([]byte("ab"))
	if _, err := w.Write([]byte("cd")); err == nil {
		t.Fatal("Write did not report the failed chunk write")
	}
	if _, err := w.Write([]byte("ef")); err == nil {
		t.Fatal("Write after a failure succeeded")
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a failure succeeded")
	}
}

func readAllRecords(t *testing.T, data []byte) [][]byte {
	t.Helper()
	idx, err := LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return scanRange(t, NewRangeScanner(bytes.NewReader(data), idx, -1, -1))
}
