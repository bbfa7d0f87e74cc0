package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// decodeBody reads one JSON object of at most limit bytes into v. Unknown
// fields, trailing data, a body that is not an object and an empty body
// (unless allowEmpty) are invalid; a larger body is too_large.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, allowEmpty bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return rpc.Errorf(rpc.CodeTooLarge, "request body exceeds %d bytes", limit)
		}
		return invalidf("reading the request body: %v", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		if allowEmpty {
			return nil
		}
		return invalidf("request body is empty; send a JSON object")
	}
	if b[0] != '{' {
		return invalidf("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidf("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidf("trailing data after the JSON object")
	}
	return nil
}

// parseRequestID reads the X-Raftmaster-Request-Id header,
// "<client uuid>/<sequence>". No header means no de-duplication.
func parseRequestID(r *http.Request) (fsm.RequestID, error) {
	v := r.Header.Get(rpc.HeaderRequestID)
	if v == "" {
		return fsm.RequestID{}, nil
	}
	client, seq, ok := strings.Cut(v, "/")
	if !ok {
		return fsm.RequestID{}, invalidf("%s %q: want <client uuid>/<sequence>", rpc.HeaderRequestID, v)
	}
	id, err := uuid.Parse(client)
	if err != nil || id == uuid.Nil {
		return fsm.RequestID{}, invalidf("%s %q: client id is not a non-nil UUID", rpc.HeaderRequestID, v)
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return fsm.RequestID{}, invalidf("%s %q: sequence is not an unsigned integer", rpc.HeaderRequestID, v)
	}
	return fsm.RequestID{Client: id, Seq: n}, nil
}

// checkID checks a group, trainer or node id.
func checkID(what, id string) error {
	if id == "" {
		return invalidf("%s is empty", what)
	}
	if len(id) > fsm.MaxIDLen {
		return invalidf("%s is %d bytes long, at most %d", what, len(id), fsm.MaxIDLen)
	}
	return nil
}

// checkMember checks an allgather member id.
func checkMember(id uuid.UUID) error {
	if id == uuid.Nil {
		return invalidf("member is the nil UUID")
	}
	return nil
}

// checkDuration checks that lo <= d <= hi.
func checkDuration(what string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return invalidf("%s %v out of range [%v, %v]", what, d, lo, hi)
	}
	return nil
}
