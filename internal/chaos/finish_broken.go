//go:build chaos_broken_finish

package chaos

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// brokenFinish is deliberately wrong in this build: through it the
// cluster looks like one whose GetTask drops the finish it carries
// (rpc.GetTaskRequest.Finished) yet answers it accepted. The finish is
// taken out of the request, which leases the next task alone, and the
// answer, an error of the lease too, says the finish was accepted. The
// task stays leased until its lease ends, then goes out again in the
// pass it was reported finished in.
func brokenFinish(rt http.RoundTripper) http.RoundTripper { return dropFinish{base: rt} }

type dropFinish struct{ base http.RoundTripper }

// taskGetSuffix ends the GetTask path of every job.
var taskGetSuffix = strings.TrimPrefix(rpc.PathTaskGet, "/v1")

// RoundTrip sends a GetTask without its finish, and says in the answer
// that the finish was accepted; any other request goes as it is.
func (t dropFinish) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, taskGetSuffix) || req.Body == nil {
		return t.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var in rpc.GetTaskRequest
	if json.Unmarshal(body, &in) != nil || in.Finished == nil {
		return t.base.RoundTrip(withBody(req, body))
	}
	in.Finished = nil
	if body, err = json.Marshal(in); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(withBody(req, body))
	if err != nil {
		return resp, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(out, &m) == nil && (resp.StatusCode == http.StatusOK || leaseRefusal(m)) {
		m["finish"] = json.RawMessage(`{}`)
		if b, err := json.Marshal(m); err == nil {
			out = b
		}
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(out)), int64(len(out))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// leaseRefusal reports whether an error answer is one the lease of a
// GetTask gives after its finish was applied.
func leaseRefusal(m map[string]json.RawMessage) bool {
	var code string
	if json.Unmarshal(m["code"], &code) != nil {
		return false
	}
	switch code {
	case fsm.CodePassBefore.String(), fsm.CodePassAfter.String(), fsm.CodeNoMoreAvailable.String(),
		fsm.CodeAllTaskFailed.String(), fsm.CodeNoDataset.String(), fsm.CodeStaleEpoch.String():
		return true
	}
	return false
}

// withBody returns req with body as its body.
func withBody(req *http.Request, body []byte) *http.Request {
	r := req.Clone(req.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r
}
