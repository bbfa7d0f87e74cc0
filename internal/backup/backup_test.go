package backup

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/raftmaster/raftmaster/fsm"
)

// open opens a backup file held in b.
func open(b []byte) (*File, error) { return Open(bytes.NewReader(b), int64(len(b))) }

// readState opens a backup file held in b and copies its state.
func readState(b []byte) (Header, []byte, error) {
	f, err := open(b)
	if err != nil {
		return Header{}, nil, err
	}
	var out bytes.Buffer
	err = f.CopyState(&out)
	return f.Header, out.Bytes(), err
}

// TestRoundTripAndDamage: a backup written a piece at a time reads back
// whole; a truncated, padded, altered or foreign file is refused as
// ErrCorrupt, by Open or at the latest by CopyState.
func TestRoundTripAndDamage(t *testing.T) {
	f := fsm.New()
	f.ApplyEntry(1, fsm.Encode(&fsm.RequestSaveModel{TrainerID: "t", BlockDur: 1e9}))
	snap := f.SnapshotBytes()
	var buf bytes.Buffer
	w, err := NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for p := range slices.Chunk(snap, 7) {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	h, err := w.Finish("v1.2.3", 1)
	if err != nil {
		t.Fatal(err)
	}
	if h.StateHash != f.StateHash() || h.Size != int64(len(snap)) || h.Index != 1 || h.Version != "v1.2.3" {
		t.Fatalf("header %+v, state hash %s, %d bytes", h, f.StateHash(), len(snap))
	}
	whole := buf.Bytes()
	got, data, err := readState(whole)
	if err != nil || got != h || !bytes.Equal(data, snap) {
		t.Fatalf("read back %+v %v", got, err)
	}
	if of, _ := open(whole); of.Format != 2 {
		t.Fatalf("format %d, want 2", of.Format)
	}
	var again bytes.Buffer
	if h2, err := Write(&again, "v1.2.3", 1, snap); err != nil || h2 != h || !bytes.Equal(again.Bytes(), whole) {
		t.Fatalf("Write of the whole snapshot: %+v %v, or other bytes", h2, err)
	}

	for name, b := range damaged(whole, len(magicV2)) {
		if _, _, err := readState(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// damaged returns copies of the backup file whole, whose state starts at
// offset start, damaged in every way a file can be.
func damaged(whole []byte, start int) map[string][]byte {
	altered := bytes.Clone(whole)
	altered[start+3] ^= 0xff
	return map[string][]byte{
		"truncated":          whole[:len(whole)-1],
		"truncated by half":  whole[:len(whole)/2],
		"cut to its state":   whole[:start+3],
		"padded":             append(bytes.Clone(whole), 0),
		"altered state":      altered,
		"foreign":            []byte("root:x:0:0:root:/root:/bin/sh\n"),
		"empty":              nil,
		"first line only":    whole[:start],
		"missing first byte": whole[1:],
	}
}

// TestReadsVersion1: a file written by an earlier release (format 1, the
// description first) is read, and its damaged copies are refused.
func TestReadsVersion1(t *testing.T) {
	whole, err := os.ReadFile("testdata/v1.backup")
	if err != nil {
		t.Fatal(err)
	}
	f, err := open(whole)
	if err != nil {
		t.Fatal(err)
	}
	if f.Format != 1 || f.Header.Version != "v0.9.0" || f.Header.Index != 2 {
		t.Fatalf("format %d, header %+v", f.Format, f.Header)
	}
	var snap bytes.Buffer
	if err := f.CopyState(&snap); err != nil {
		t.Fatal(err)
	}
	restored := fsm.New()
	if err := restored.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	if restored.StateHash() != f.Header.StateHash {
		t.Fatalf("restored state hash %s, the file says %s", restored.StateHash(), f.Header.StateHash)
	}
	if st := restored.Stats("job-a"); st.Chunks != 3 {
		t.Fatalf("job-a restored as %+v, want its 3 chunks", st)
	}
	start := bytes.IndexByte(whole[len(magicV1):], '\n') + len(magicV1) + 1
	for name, b := range damaged(whole, start) {
		if _, _, err := readState(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestCopyStateReportsTheWritersError: a failing destination is not taken
// for a damaged file.
func TestCopyStateReportsTheWritersError(t *testing.T) {
	var buf bytes.Buffer
	if _, err := Write(&buf, "v", 1, bytes.Repeat([]byte("x"), 3<<20)); err != nil {
		t.Fatal(err)
	}
	f, err := open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	full := errors.New("disk full")
	if err := f.CopyState(failingWriter{full}); !errors.Is(err, full) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("CopyState into a failing writer: %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
