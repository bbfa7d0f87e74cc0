//go:build !chaos_broken_client

package client

// retryWithFreshIDs is false: every retry of a write reuses its request id,
// so the FSM answers a retry of an applied write with the first outcome.
// The chaos_broken_client build tag flips it, to show that the
// fault-injection checks catch a client that gets this wrong.
const retryWithFreshIDs = false
