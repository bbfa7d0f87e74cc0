package store

import "go.uber.org/zap"

// nopLogger keeps the etcd client quiet; the store reports its errors.
func nopLogger() *zap.Logger { return zap.NewNop() }
