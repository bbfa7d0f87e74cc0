package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/raftmaster/raftmaster/rpc"
)

// KVValue is what a key of the job's register holds.
type KVValue struct {
	// Found reports that the key exists; when it does not, Value is nil
	// and Version 0.
	Found bool
	// Value is the key's value.
	Value []byte
	// Version identifies the value: give it to KVCompareAndSet to replace
	// it. No key of any job is ever given a version again, so it is a
	// fencing token.
	Version uint64
}

// KVResult is the outcome of KVCompareAndSet.
type KVResult struct {
	// Swapped reports that the value was stored.
	Swapped bool
	// KVValue is the key afterwards: the value stored and its new version
	// when Swapped, else the key's current value and version.
	KVValue
}

// KVGet reads key of the client's job's register (WithJob). The read is
// linearizable: the leader answers after a read barrier, so it reflects
// every compare-and-set acknowledged before the call. A key is 1 to 256
// bytes of printable ASCII without spaces; another is ErrInvalid.
func (c *Client) KVGet(ctx context.Context, key string) (KVValue, error) {
	var resp rpc.KVGetResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathKVGet, query: url.Values{rpc.KVParamKey: {key}}, out: &resp})
	if err != nil {
		return KVValue{}, err
	}
	return KVValue{Found: resp.Found, Value: resp.Value, Version: resp.Version}, nil
}

// KVCompareAndSet stores value under key in the client's job's register
// if the key's version is version, 0 meaning that the key must not exist.
// Otherwise nothing changes, and the result carries the key's current
// value and version, to decide from and try again with. It is retried
// with one request id, so it is applied at most once; a retry of one that
// did not swap reports the key as it is then. A value over the cluster's
// limit, or a key past the job's key limit, is ErrLimitExceeded.
func (c *Client) KVCompareAndSet(ctx context.Context, key string, version uint64, value []byte) (KVResult, error) {
	var resp rpc.KVCompareAndSetResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVCompareAndSet,
		body: rpc.KVCompareAndSetRequest{Key: key, Version: version, Value: value}, write: true, out: &resp})
	if err != nil {
		return KVResult{}, err
	}
	return KVResult{Swapped: resp.Swapped, KVValue: KVValue{Found: resp.Found, Value: resp.Value, Version: resp.Version}}, nil
}
