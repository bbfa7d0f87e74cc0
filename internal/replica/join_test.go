package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/rpc"
)

// earlierLeader answers joins as a leader of a release before protocol
// levels did: a body with a field it does not know is invalid JSON. It
// records the joins it accepted.
func earlierLeader(t *testing.T) (addr string, accepted *[]string) {
	t.Helper()
	var joined []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			ID       string `json:"id"`
			RaftAddr string `json:"raft_addr"`
			APIAddr  string `json:"api_addr"`
		}
		body, _ := io.ReadAll(r.Body)
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"code":"invalid","message":"malformed JSON body: %s"}`, strings.ReplaceAll(err.Error(), `"`, `\"`))
			return
		}
		joined = append(joined, in.ID)
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &joined
}

// A node whose data directory an earlier release made joins a leader of
// that release in its terms; a new incarnation does not, as that leader
// would make it a voter before it caught up.
func TestJoinALeaderOfAnEarlierRelease(t *testing.T) {
	addr, joined := earlierLeader(t)
	p := newPeerAPI(Config{})
	ctx := context.Background()
	self := rpc.AddVoterRequest{ID: "n2", RaftAddr: "n2:7000", APIAddr: "n2:8000", Protocol: 2, Version: "v2", LastIndex: 7}

	err := postJoin(ctx, p, addr, self)
	if !byEarlierRelease(err) {
		t.Fatalf("the full request: %v; want it refused as an earlier release refuses unknown fields", err)
	}
	if err := joinEarlierRelease(ctx, p, addr, self); err != nil {
		t.Fatalf("joining in the earlier release's terms: %v", err)
	}
	self.ID = "n2~3fa4c1d0"
	if err := joinEarlierRelease(ctx, p, addr, self); err == nil || !strings.Contains(err.Error(), "upgrade the leader") {
		t.Fatalf("a new incarnation joining an earlier release's leader: %v; want it refused here", err)
	}
	if strings.Join(*joined, ",") != "n2" {
		t.Fatalf("the earlier release's leader accepted %v, want only n2", *joined)
	}
	if byEarlierRelease(&joinRefused{status: http.StatusBadRequest, msg: `{"code":"invalid","message":"node n2 runs a release of protocol level 1"}`}) {
		t.Fatal("another refusal taken for an earlier release's")
	}
}
