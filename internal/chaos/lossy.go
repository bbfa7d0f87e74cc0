package chaos

import (
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/raftmaster/raftmaster/rpc"
)

// errAnswerLost is what a client sees of a write whose answer was lost.
var errAnswerLost = errors.New("chaos: the answer to this write was lost on the way back")

// answerLoss loses, while on, half of the answers to writes after the
// cluster has applied them: the connection that carried the answer dies,
// so the client cannot tell whether its write took effect and must retry
// it with the same request id. This is the fault that a client which
// retries with fresh ids gets wrong.
type answerLoss struct {
	on  atomic.Bool
	mu  sync.Mutex
	rng *rand.Rand
}

func newAnswerLoss(seed uint64) *answerLoss {
	return &answerLoss{rng: rand.New(rand.NewPCG(seed, 0x105e))}
}

func (a *answerLoss) lose() bool {
	if !a.on.Load() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rng.IntN(2) == 0
}

// transport wraps base so that it loses answers to writes while a is on.
func (a *answerLoss) transport(base http.RoundTripper) http.RoundTripper {
	return lossyTransport{base: base, loss: a}
}

type lossyTransport struct {
	base http.RoundTripper
	loss *answerLoss
}

// RoundTrip sends req; the answer to a write that succeeded may be lost.
func (t lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || req.Header.Get(rpc.HeaderRequestID) == "" || !t.loss.lose() {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errAnswerLost
}
