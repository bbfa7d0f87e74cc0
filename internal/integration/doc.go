// Package integration holds the end-to-end tests: they build the real
// raftmaster binary, start clusters of serve processes on 127.0.0.1 and
// drive them through the Go client and the CLI, as trainers and operators
// do.
package integration
