package quota

import (
	"fmt"
	"testing"
	"time"
)

// TestTake: a bucket spends its burst, then refuses with the wait until
// it holds enough, and refills at its rate; keys are apart; a nil
// Limiter allows everything.
func TestTake(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(Rate{PerSecond: 10, Burst: 20})
	l.now = func() time.Time { return now }
	for i := range 20 {
		if ok, _ := l.Take("a", 1); !ok {
			t.Fatalf("unit %d of the burst refused", i)
		}
	}
	if ok, wait := l.Take("a", 1); ok || wait != time.Second {
		t.Fatalf("past the burst: %v %v, want a refusal for 1s", ok, wait)
	}
	if ok, _ := l.Take("b", 20); !ok {
		t.Fatal("another key shares the first's bucket")
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := l.Take("a", 5); !ok {
		t.Fatal("5 units after half a second at 10/s refused")
	}
	if ok, wait := l.Take("a", 15); ok || wait != 2*time.Second {
		t.Fatalf("15 units of an empty bucket: %v %v, want a refusal for 2s", ok, wait)
	}
	var none *Limiter
	if ok, _ := none.Take("a", 1e9); !ok || New(Rate{}) != nil {
		t.Fatal("no quota refused")
	}
}

// TestBoundedKeys: the buckets stay at most maxKeys, however many keys
// spend.
func TestBoundedKeys(t *testing.T) {
	l := New(Rate{PerSecond: 1, Burst: 2})
	l.maxKeys = 100
	for i := range 1000 {
		l.Take(fmt.Sprint(i), 1)
		if l.Len() > l.maxKeys {
			t.Fatalf("%d buckets after %d keys", l.Len(), i+1)
		}
	}
}
