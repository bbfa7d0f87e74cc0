//go:build chaos_broken_client

package client

// retryWithFreshIDs is true in this deliberately broken build: a retried
// write looks new to the FSM and may be applied twice.
const retryWithFreshIDs = true
