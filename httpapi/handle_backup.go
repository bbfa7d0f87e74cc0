package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleBackup answers a consistent copy of the whole state: after a read
// barrier, so that it holds every write acknowledged before the request,
// a point-in-time snapshot of the leader's state machine with its index
// and hash. Applies go on while it is encoded.
func (s *Handler) handleBackup(w http.ResponseWriter, r *http.Request) error {
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	sn, err := s.b.FSM().Snapshot()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		return err
	}
	sum := sha256.Sum256(buf.Bytes())
	writeJSON(w, http.StatusOK, rpc.BackupResponse{
		Version: version.String(), Index: sn.Index(), StateHash: hex.EncodeToString(sum[:]), Snapshot: buf.Bytes(),
	})
	return nil
}
