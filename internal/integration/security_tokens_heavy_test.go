//go:build heavy

package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestSecurityTokensTenThousandTrainers: with serve's default quotas,
// 10,000 trainers under one job token each start an identity with a
// write, and then all restart at once with new identities: no write is
// refused.
func TestSecurityTokensTenThousandTrainers(t *testing.T) {
	needsProcesses(t)
	file := writeTokenFile(t, "trainer "+secTokA+" a", "operator "+secTokOp)
	t.Setenv("RAFTMASTER_TOKEN", secTokOp)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--auth-tokens", file}})
	c.WaitReady()
	leader := c.Leader().APIAddr
	const trainers = 10000
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := time.Now()
	for _, round := range []string{"start", "restart"} {
		errs := make(chan string, trainers)
		next := make(chan int)
		done := make(chan struct{})
		for range 64 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := range next {
					body := fmt.Sprintf(`{"trainer_id":"t%d","block_dur":"1ms"}`, i)
					req, _ := http.NewRequest(http.MethodPost, "http://"+leader+"/v1/jobs/a/savemodel", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(rpc.HeaderAuthorization, "Bearer "+secTokA)
					req.Header.Set(rpc.HeaderRequestID, uuid.NewString()+"/1")
					resp, err := hc.Do(req)
					if err != nil {
						errs <- err.Error()
						continue
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						errs <- fmt.Sprintf("%s: %s", resp.Status, b)
					}
				}
			}()
		}
		for i := range trainers {
			next <- i
		}
		close(next)
		for range 64 {
			<-done
		}
		close(errs)
		n, first := 0, ""
		for e := range errs {
			if n == 0 {
				first = e
			}
			n++
		}
		if n != 0 {
			t.Fatalf("%s: %d of %d trainers' writes failed with the default quotas; first: %s", round, n, trainers, first)
		}
	}
	t.Logf("%d trainers started and restarted (%d writes, %d identities) in %v", trainers, 2*trainers, 2*trainers, time.Since(start).Round(time.Millisecond))
}
