package client

import "time"

// WithPassWait shortens the wait of the record reader for a pass that has
// not started, so that tests of many passes run fast.
func WithPassWait(lo, hi time.Duration) Option {
	return func(c *Client) error {
		c.passWaitMin, c.passWaitMax = lo, hi
		return nil
	}
}

// WithAttemptTimeout sets the timeout of the attempts of calls that set
// none themselves, so that tests can outlast it quickly.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *Client) error {
		c.attemptTimeout = d
		return nil
	}
}

// WithMaxWriteRetry shortens rpc.MaxWriteRetry, the longest a write keeps
// retrying whatever WithRetry says, so that a test can reach it.
func WithMaxWriteRetry(d time.Duration) Option {
	return func(c *Client) error {
		c.maxWriteRetry = d
		return nil
	}
}

// HeldTasks is the number of tasks c's reader holds: leased, and not yet
// reported. A function, not a method: the methods of *Client are its API.
func HeldTasks(c *Client) int {
	c.held.mu.Lock()
	defer c.held.mu.Unlock()
	return len(c.held.m)
}

// WithRideRetry shortens how long the record reader reports its tasks
// finished on their own after a cluster below protocol level 9 refused a
// GetTask that carried a finish.
func WithRideRetry(d time.Duration) Option {
	return func(c *Client) error {
		c.rideRetry = d
		return nil
	}
}
