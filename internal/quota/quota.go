// Package quota holds token buckets keyed by who spends them (a token's
// owner hash, or a source address), with a bounded number of keys.
package quota

import (
	"math"
	"sync"
	"time"
)

// Rate is a token bucket's refill rate and size. The zero Rate is no
// quota.
type Rate struct {
	// PerSecond is how many units a key earns each second.
	PerSecond float64
	// Burst is how many units a key may spend at once: the bucket's size,
	// full at first.
	Burst float64
}

// On reports whether r limits anything.
func (r Rate) On() bool { return r.PerSecond > 0 }

// DefaultMaxKeys bounds the buckets of a Limiter: past it, buckets that
// are full again, which hold nothing a new bucket would not, are dropped.
const DefaultMaxKeys = 1 << 16

// Limiter is a set of token buckets of one Rate. It is safe for
// concurrent use.
type Limiter struct {
	rate    Rate
	maxKeys int
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	level float64
	at    time.Time
}

// New returns a Limiter of rate, or nil when rate is off; a nil Limiter
// allows everything.
func New(rate Rate) *Limiter {
	if !rate.On() {
		return nil
	}
	if rate.Burst < 1 {
		rate.Burst = 1
	}
	return &Limiter{rate: rate, maxKeys: DefaultMaxKeys, now: time.Now, buckets: make(map[string]*bucket)}
}

// Take spends n units of key's bucket. When the bucket holds fewer it
// spends nothing and returns false with how long the bucket takes to hold
// n (at least a second, rounded up to whole seconds, for Retry-After).
func (l *Limiter) Take(key string, n float64) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys {
			l.sweep(now)
		}
		b = &bucket{level: l.rate.Burst, at: now}
		l.buckets[key] = b
	}
	b.level = min(l.rate.Burst, b.level+now.Sub(b.at).Seconds()*l.rate.PerSecond)
	b.at = now
	if b.level >= n {
		b.level -= n
		return true, 0
	}
	wait := (min(n, l.rate.Burst) - b.level) / l.rate.PerSecond
	return false, time.Duration(max(1, math.Ceil(wait))) * time.Second
}

// sweep drops the buckets that are full at now; if none is, the oldest
// half, which refill soonest.
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.level+now.Sub(b.at).Seconds()*l.rate.PerSecond >= l.rate.Burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) < l.maxKeys {
		return
	}
	// Every bucket is in use: drop half of them, which may let their
	// keys spend up to a burst again, but keeps the memory bounded.
	n := 0
	for k := range l.buckets {
		if n >= l.maxKeys/2 {
			break
		}
		delete(l.buckets, k)
		n++
	}
}

// Len returns how many buckets the Limiter holds.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
