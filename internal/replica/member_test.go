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

// earlierLeader answers requests for membership as a leader of a release
// before protocol levels did: a body with a field it does not know is
// invalid JSON. It records the members it added.
func earlierLeader(t *testing.T) (addr string, accepted *[]string) {
	t.Helper()
	var added []string
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
		added = append(added, in.ID)
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &added
}

// A node whose data directory an earlier release made asks a leader of
// that release for membership in its terms; a new incarnation does not,
// as that leader would make it a voter before it caught up.
func TestAddMemberByALeaderOfAnEarlierRelease(t *testing.T) {
	addr, added := earlierLeader(t)
	p := newPeerAPI(Config{})
	ctx := context.Background()
	self := rpc.AddMemberRequest{ID: "n2", RaftAddr: "n2:7000", APIAddr: "n2:8000", Protocol: 2, Version: "v2", LastIndex: 7}

	err := postAddMember(ctx, p, addr, self)
	if !byEarlierRelease(err) {
		t.Fatalf("the full request: %v; want it refused as an earlier release refuses unknown fields", err)
	}
	if err := addMemberEarlierRelease(ctx, p, addr, self); err != nil {
		t.Fatalf("asking in the earlier release's terms: %v", err)
	}
	self.ID = "n2~3fa4c1d0"
	if err := addMemberEarlierRelease(ctx, p, addr, self); err == nil || !strings.Contains(err.Error(), "upgrade the leader") {
		t.Fatalf("a new incarnation asking an earlier release's leader: %v; want it refused here", err)
	}
	if strings.Join(*added, ",") != "n2" {
		t.Fatalf("the earlier release's leader added %v, want only n2", *added)
	}
	if byEarlierRelease(&addMemberRefused{status: http.StatusBadRequest, msg: `{"code":"invalid","message":"node n2 runs a release of protocol level 1"}`}) {
		t.Fatal("another refusal taken for an earlier release's")
	}
}
