package raftnode

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// TestRestoreDataDirStreamsAndLeavesNothingOnFailure: RestoreDataDir
// writes the state it is given, in the next era, as a Raft snapshot at the
// index; when the state's writer fails partway, no snapshot and no
// directory RestoreDataDir made are left, and the directory can be
// restored into afterwards.
func TestRestoreDataDirStreamsAndLeavesNothingOnFailure(t *testing.T) {
	f := fsm.New()
	f.ApplyEntry(1, fsm.Encode(&fsm.SetProtocol{Level: fsm.Protocol2}))
	f.ApplyEntry(2, fsm.Encode(&fsm.KVCompareAndSet{Header: fsm.Header{Job: "a"}, Key: "k", Value: bytes.Repeat([]byte("state "), 1<<16)}))
	state := f.SnapshotBytes()
	var nextEra bytes.Buffer
	if err := fsm.NextEra(&nextEra, bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	damaged := errors.New("damaged")
	for _, exists := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "node")
		if exists {
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		err := RestoreDataDir(dir, "n1", "127.0.0.1:1", 42, func(w io.Writer) error {
			if _, err := w.Write(state[:len(state)/2]); err != nil {
				return err
			}
			return damaged
		}, nil)
		if !errors.Is(err, damaged) {
			t.Fatalf("restore with a failing state: %v", err)
		}
		if !exists {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("a failed restore left %s behind", dir)
			}
		} else if snaps, _ := os.ReadDir(filepath.Join(dir, "snapshots")); len(snaps) != 0 {
			t.Fatalf("a failed restore left snapshots %v", snaps)
		}

		if err := RestoreDataDir(dir, "n1", "127.0.0.1:1", 42, func(w io.Writer) error {
			_, err := w.Write(state)
			return err
		}, nil); err != nil {
			t.Fatal(err)
		}
		store, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		metas, err := store.List()
		if err != nil || len(metas) != 1 || metas[0].Index != 42 {
			t.Fatalf("snapshots %+v, %v; want one at index 42", metas, err)
		}
		_, rc, err := store.Open(metas[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, nextEra.Bytes()) {
			t.Fatalf("the snapshot holds %d bytes (%v), want the %d of the state in the next era", len(got), err, nextEra.Len())
		}
		if err := RestoreDataDir(dir, "n1", "127.0.0.1:1", 42, func(io.Writer) error { return nil }, nil); err == nil {
			t.Fatal("a second restore into the same directory succeeded")
		}
	}
}
