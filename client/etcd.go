package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/store/etcdkeys"
)

// WithEtcd finds the active master of the etcd backend through etcd, as the
// original's option of the same name did: NewClient waits up to timeout for a
// master to publish its address at /master/addr, and the client follows
// that key as masters fail over. It can be combined with WithAddrs, whose
// addresses are tried when the published one does not answer.
//
// It speaks to etcd's JSON gateway (/v3/kv/range and /v3/watch, served on
// etcd's client port by default), so a trainer links no gRPC or etcd
// client library.
func WithEtcd(endpoints []string, timeout time.Duration) Option {
	return func(c *Client) error {
		if len(endpoints) == 0 {
			return errors.New("raftmaster client: WithEtcd needs at least one etcd endpoint")
		}
		if timeout <= 0 {
			return fmt.Errorf("raftmaster client: WithEtcd timeout %v must be positive", timeout)
		}
		c.etcdEndpoints = endpoints
		c.etcdTimeout = timeout
		if c.etcdAddrKey == "" {
			c.etcdAddrKey = etcdkeys.DefaultAddr
		}
		return nil
	}
}

// WithEtcdPrefix makes WithEtcd follow the masters started with serve
// --etcd-prefix prefix: the address is read at prefix+"/addr" instead of
// /master/addr.
func WithEtcdPrefix(prefix string) Option {
	return func(c *Client) error {
		if !strings.HasPrefix(prefix, "/") {
			return fmt.Errorf("raftmaster client: etcd prefix %q: want an absolute key such as /master", prefix)
		}
		c.etcdAddrKey = etcdkeys.Under(prefix).Addr
		return nil
	}
}

// discoverMaster waits for a published master address.
func (c *Client) discoverMaster(hc *http.Client) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.etcdTimeout)
	defer cancel()
	found := make(chan string, 1)
	go FollowEtcdMaster(ctx, hc, c.etcdEndpoints, c.etcdAddrKey, func(addr string) {
		if addr != "" {
			select {
			case found <- addr:
			default:
			}
		}
	})
	select {
	case addr := <-found:
		return addr, nil
	case <-ctx.Done():
		return "", fmt.Errorf("raftmaster client: no master published its address at %s in etcd %v within %v",
			c.etcdAddrKey, c.etcdEndpoints, c.etcdTimeout)
	}
}

// followMaster points the client at every address the active master
// publishes, until the client is closed.
func (c *Client) followMaster(hc *http.Client) {
	FollowEtcdMaster(c.ctx, hc, c.etcdEndpoints, c.etcdAddrKey, func(addr string) {
		if addr == "" {
			return
		}
		base, err := c.normalize(addr)
		if err != nil {
			c.logger.Warn("ignoring a malformed master address in etcd", "addr", addr, "error", err)
			return
		}
		c.ep.use(base)
	})
}

// FollowEtcdMaster calls found with the master address at key in the etcd
// cluster at endpoints (the empty string while none is published), and
// again whenever it changes, until ctx is done. It reads the key, then
// watches it from the next revision, through etcd's JSON gateway with hc;
// a failure moves to the next endpoint after a short pause. Clients of the
// etcd backend use it through WithEtcd; standby masters use it too, to
// know where to redirect.
func FollowEtcdMaster(ctx context.Context, hc *http.Client, endpoints []string, key string, found func(addr string)) {
	for i := 0; ctx.Err() == nil; i++ {
		base := etcdURL(endpoints[i%len(endpoints)])
		if addr, rev, err := etcdGet(ctx, hc, base, key); err == nil {
			found(addr)
			// The watch returns when its stream ends, for whatever
			// reason: read the key again, from the next endpoint.
			_ = etcdWatch(ctx, hc, base, key, rev+1, found)
		}
		if ctx.Err() == nil && !sleep(ctx, etcdRetryPause) {
			return
		}
	}
}

// etcdRetryPause is the wait before the next endpoint after a failure.
const etcdRetryPause = 500 * time.Millisecond

// etcdURL turns an etcd endpoint ("host:port" or a URL) into a base URL.
func etcdURL(endpoint string) string {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	return strings.TrimSuffix(endpoint, "/")
}

// etcdKV is a key-value pair as the gateway writes it: base64 bytes.
type etcdKV struct {
	Value []byte `json:"value"`
}

type etcdHeader struct {
	Revision string `json:"revision"`
}

// etcdPost posts a JSON request to the gateway. The header asks for a
// member that has a leader, so that a partitioned member fails instead of
// answering from stale data.
func etcdPost(ctx context.Context, hc *http.Client, url string, body any) (*http.Response, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Grpc-Metadata-Hasleader", "true")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("etcd %s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// etcdGet reads key and the store's revision.
func etcdGet(ctx context.Context, hc *http.Client, base, key string) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := etcdPost(ctx, hc, base+"/v3/kv/range", map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Header etcdHeader `json:"header"`
		KVs    []etcdKV   `json:"kvs"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", 0, fmt.Errorf("etcd range: %w", err)
	}
	rev, err := strconv.ParseInt(out.Header.Revision, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("etcd range: revision %q: %w", out.Header.Revision, err)
	}
	addr := ""
	if len(out.KVs) > 0 {
		addr = string(out.KVs[0].Value)
	}
	return addr, rev, nil
}

// etcdWatch streams the changes of key from revision from, calling found
// for each, until the stream ends or ctx is done.
func etcdWatch(ctx context.Context, hc *http.Client, base, key string, from int64, found func(string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := etcdPost(ctx, hc, base+"/v3/watch", map[string]any{"create_request": map[string]string{
		"key": base64.StdEncoding.EncodeToString([]byte(key)), "start_revision": strconv.FormatInt(from, 10),
	}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var msg struct {
			Result struct {
				Canceled bool `json:"canceled"`
				Events   []struct {
					Type string `json:"type"`
					KV   etcdKV `json:"kv"`
				} `json:"events"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			return fmt.Errorf("etcd watch: %w", err)
		}
		if msg.Error != nil || msg.Result.Canceled {
			return fmt.Errorf("etcd watch of %s ended: %s", key, sc.Bytes())
		}
		for _, ev := range msg.Result.Events {
			if ev.Type == "DELETE" {
				found("")
			} else {
				found(string(ev.KV.Value))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("etcd watch: stream ended")
}
