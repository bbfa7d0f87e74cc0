package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
)

// TestReaderSaysItsSessionEnded: a reader whose session ends while it
// holds a task (its link was cut for the TTL, and the task went to
// another trainer) delivers no more of its records, says so once with
// ErrSessionExpired, and commits no cursor until it restores one, since
// the records of it already trained may be trained again.
func TestReaderSaysItsSessionEnded(t *testing.T) {
	_, url := sessionServer(t, 8, 4, nil) // two tasks of four records
	link := &cuttable{rt: http.DefaultTransport.(*http.Transport).Clone()}
	c := newClient(t, client.WithAddr(url), client.WithSessionTTL(time.Second), client.WithBuffer(8),
		client.WithHTTPClient(&http.Client{Transport: link}), client.WithRetry(time.Second))
	first, err := c.CommitCursor(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.StartGetRecords(0)
	if _, err := c.NextRecord(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reader to hold both tasks", 30*time.Second, func() bool { return client.HeldTasks(c) == 2 })
	// The trainer loses the cluster for longer than its TTL: its session
	// ends, and another trainer takes its tasks.
	link.cut.Store(true)
	other := newClient(t, client.WithAddr(url))
	waitFor(t, "the other trainer to get a task", 30*time.Second, func() bool {
		_, err := other.GetTask(0)
		return err == nil
	})
	link.cut.Store(false)
	var got error
	waitFor(t, "the reader to say that its session ended", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, got = c.NextRecordContext(ctx)
		return got != nil && !errors.Is(got, context.DeadlineExceeded)
	})
	if !errors.Is(got, client.ErrSessionExpired) {
		t.Fatalf("NextRecord answered %v, want ErrSessionExpired", got)
	}
	if _, err := c.CommitCursor(context.Background(), 1); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("CommitCursor after the loss answered %v, want ErrSessionExpired", err)
	}
	if _, err := c.ReportProgress(context.Background()); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("ReportProgress after the loss answered %v, want ErrSessionExpired", err)
	}
	// Restarting from the checkpoint clears it.
	if _, err := c.RestoreCursor(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitCursor(context.Background(), 2); err != nil {
		t.Fatalf("CommitCursor after the restore: %v", err)
	}
}
