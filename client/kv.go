package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

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

// The store's calls below need a cluster at protocol level 5: one whose
// servers all run a release that knows it. Below it the leader answers
// unavailable, which the client retries until its context or retry budget
// ends (ErrUnavailable); StatusContext reports the cluster's level
// (rpc.StatusResponse.ClusterProtocol).

// KVDeleteResult is the outcome of KVDelete.
type KVDeleteResult struct {
	// Deleted reports that the key was deleted.
	Deleted bool
	// Found reports that the key existed when the delete ran, and
	// Version is its version then: the one deleted, or the one a
	// conditional delete did not match.
	Found   bool
	Version uint64
}

// KVDelete deletes key from the client's job's register; with a version
// other than 0, only while the key is at that version. A key deleted and
// created again takes a new version, so a compare-and-set fenced by the
// deleted value's version swaps nothing. It is retried with one request
// id, so it is applied at most once: a retry answers the first outcome
// and deletes nothing the key holds since.
func (c *Client) KVDelete(ctx context.Context, key string, version uint64) (KVDeleteResult, error) {
	var resp rpc.KVDeleteResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVDelete,
		body: rpc.KVDeleteRequest{Key: key, Version: version}, write: true, out: &resp})
	if err != nil {
		return KVDeleteResult{}, err
	}
	return KVDeleteResult{Deleted: resp.Deleted, Found: resp.Found, Version: resp.Version}, nil
}

// KVDeletePrefix deletes every key of the client's job's register that
// starts with prefix, in one log entry, and returns how many it deleted.
// A prefix follows the rule of keys.
func (c *Client) KVDeletePrefix(ctx context.Context, prefix string) (int, error) {
	var resp rpc.KVDeletePrefixResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVDeletePrefix,
		body: rpc.KVDeletePrefixRequest{Prefix: prefix}, write: true, out: &resp})
	return resp.Deleted, err
}

// KVAdd adds amount to the integer key holds in decimal ASCII, 0 when it
// does not exist, and returns the sum, as torch's Store.add does. A value
// that is not a decimal integer, or a sum past 64 bits, is ErrInvalid and
// changes nothing. A retry answers the sum its first attempt made.
func (c *Client) KVAdd(ctx context.Context, key string, amount int64) (int64, error) {
	var resp rpc.KVAddResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVAdd,
		body: rpc.KVAddRequest{Key: key, Amount: amount}, write: true, out: &resp})
	return resp.Value, err
}

// KVPair is a key and its value, for KVMultiSet.
type KVPair struct {
	Key   string
	Value []byte
}

// KVMultiSet stores every value under its key in one log entry, all of
// them or, past a limit, none (ErrLimitExceeded), and returns the version
// each key was given, in the order of pairs. The keys are distinct; the
// values together are at most the cluster's value limit.
func (c *Client) KVMultiSet(ctx context.Context, pairs []KVPair) ([]uint64, error) {
	in := rpc.KVMultiSetRequest{Pairs: make([]rpc.KVPair, len(pairs))}
	for i, p := range pairs {
		in.Pairs[i] = rpc.KVPair{Key: p.Key, Value: p.Value}
	}
	var resp rpc.KVMultiSetResponse
	if err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVMultiSet, body: in, write: true, out: &resp}); err != nil {
		return nil, err
	}
	return resp.Versions, nil
}

// KVAppend appends value to key's value, creating the key, and returns the
// value's new length. The value stays within the cluster's value limit
// (ErrLimitExceeded). A retry appends nothing more.
func (c *Client) KVAppend(ctx context.Context, key string, value []byte) (int, error) {
	var resp rpc.KVAppendResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVAppend,
		body: rpc.KVAppendRequest{Key: key, Value: value}, write: true, out: &resp})
	return resp.Length, err
}

// KVCompareValue stores desired under key if the key holds expected, or
// if it does not exist and expected is empty: torch's compare_set, by
// value. The result carries the key afterwards (torch's compare_set
// returns its value when Found, else expected). A retry that swapped
// answers the same; one that did not reports the key as it is then.
func (c *Client) KVCompareValue(ctx context.Context, key string, expected, desired []byte) (KVResult, error) {
	var resp rpc.KVCompareValueResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVCompareValue,
		body: rpc.KVCompareValueRequest{Key: key, Expected: expected, Desired: desired}, write: true, out: &resp})
	if err != nil {
		return KVResult{}, err
	}
	return KVResult{Swapped: resp.Swapped, KVValue: KVValue{Found: resp.Found, Value: resp.Value, Version: resp.Version}}, nil
}

// KVMultiGet reads keys of the client's job's register, all at one point
// of the log, and returns what each holds in their order. The read is
// linearizable, as KVGet's; it is no log entry.
func (c *Client) KVMultiGet(ctx context.Context, keys []string) ([]KVValue, error) {
	var resp rpc.KVMultiGetResponse
	if err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathKVMultiGet, body: rpc.KVMultiGetRequest{Keys: keys}, out: &resp}); err != nil {
		return nil, err
	}
	if len(resp.Values) != len(keys) {
		return nil, fmt.Errorf("raftmaster client: a multi-get of %d keys answered %d values", len(keys), len(resp.Values))
	}
	out := make([]KVValue, len(resp.Values))
	for i, v := range resp.Values {
		out[i] = KVValue{Found: v.Found, Value: v.Value, Version: v.Version}
	}
	return out, nil
}

// KVNumKeys counts the keys of the client's job's register that start
// with prefix, or all of them when prefix is empty. The read is
// linearizable, as KVGet's.
func (c *Client) KVNumKeys(ctx context.Context, prefix string) (int, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set(rpc.KVParamPrefix, prefix)
	}
	var resp rpc.KVNumKeysResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathKVNumKeys, query: q, out: &resp})
	return resp.Count, err
}

// KVWatchResult is the outcome of KVWatch.
type KVWatchResult struct {
	// KVValue is what the key holds: the change the watch waited for,
	// or, when TimedOut, the key as it is when the timeout passed.
	KVValue
	// TimedOut reports that the timeout passed with the key unchanged:
	// still at the version given, or still absent for version 0.
	TimedOut bool
}

// KVWatch waits until key of the client's job's register differs from
// version after and returns what it then holds: with after 0, until the
// key exists; with a version, until the key is written again or deleted
// (Found false). When timeout passes first, it returns the key as it is,
// TimedOut set; a timeout of 0 or less looks once. The wait is a long
// poll, not a loop of reads: the leader answers as soon as the key
// changes, after a read barrier, so the answer is linearizable as
// KVGet's. It asks again every 30 s, or sooner when the server's limit
// is lower, and rides out a change of leader within its timeout. A
// server of an earlier release, which has no watch, answers an *rpc.Error
// of code not_found (rpc.CodeNotFound).
func (c *Client) KVWatch(ctx context.Context, key string, after uint64, timeout time.Duration) (KVWatchResult, error) {
	deadline := time.Now().Add(max(timeout, 0))
	q := url.Values{rpc.KVParamKey: {key}, rpc.KVWatchParamAfter: {strconv.FormatUint(after, 10)}}
	for {
		left := max(time.Until(deadline), 0)
		poll := min(left, watchWait)
		// Whole milliseconds, rounded up: a wait cut to 0 would spin.
		q.Set(rpc.KVWatchParamWait, ((poll + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String())
		var resp rpc.KVWatchResponse
		err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathKVWatch, query: q, out: &resp,
			timeout: poll + watchSlack, budget: max(c.retry, left)})
		if err != nil {
			return KVWatchResult{}, err
		}
		res := KVWatchResult{KVValue: KVValue{Found: resp.Found, Value: resp.Value, Version: resp.Version}, TimedOut: resp.TimedOut}
		if !res.TimedOut || time.Until(deadline) <= 0 {
			return res, nil
		}
	}
}
