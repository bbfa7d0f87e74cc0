// Package etcdkeys is the layout of the etcd backend's keys: where its
// masters, under one prefix (serve --etcd-prefix, /master by default),
// hold the lock, publish the active master's API address, save the state
// and list themselves. The lock, address and state keys are those of the
// original PaddlePaddle master, whose clients find the active master at
// /master/addr; they are an on-etcd format, never to change.
//
// It imports nothing but the standard library, so that the Go client,
// which follows the address key, links nothing of the server.
package etcdkeys

import "strings"

// DefaultPrefix is the prefix of the masters' keys unless serve
// --etcd-prefix says otherwise.
const DefaultPrefix = "/master"

// What each key adds to the prefix.
const (
	lockSuffix    = "/lock"
	addrSuffix    = "/addr"
	stateSuffix   = "/state"
	membersSuffix = "/members/"
)

// The keys under DefaultPrefix.
const (
	DefaultLock    = DefaultPrefix + lockSuffix
	DefaultAddr    = DefaultPrefix + addrSuffix
	DefaultState   = DefaultPrefix + stateSuffix
	DefaultMembers = DefaultPrefix + membersSuffix
)

// Layout is the keys of the masters under one prefix.
type Layout struct {
	// Lock is the key of the election lock the active master holds.
	Lock string
	// Addr is where the active master publishes its API address, for
	// clients and standbys to follow.
	Addr string
	// State is where the active master saves the state.
	State string
	// Members is the prefix under which every master, active or standby,
	// lists itself by its id.
	Members string
}

// Under returns the layout under prefix; a trailing slash of prefix is
// ignored, so that "/master/" and "/master" name the same keys.
func Under(prefix string) Layout {
	p := strings.TrimSuffix(prefix, "/")
	return Layout{Lock: p + lockSuffix, Addr: p + addrSuffix, State: p + stateSuffix, Members: p + membersSuffix}
}

// Default is the layout under DefaultPrefix.
func Default() Layout { return Under(DefaultPrefix) }
