package httpapi

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/rpc"
)

// backupStall cuts off a streamed backup whose reader takes nothing for
// this long, so that a stuck client does not keep the snapshot copy and
// its connection forever. A reader that keeps reading, however slowly, is
// never cut off.
const backupStall = 2 * time.Minute

// backupBuffer is the size of the writes of a streamed backup.
const backupBuffer = 256 << 10

// handleBackup answers a consistent copy of the whole state: after a read
// barrier, so that it holds every write acknowledged before the request,
// a point-in-time snapshot of the leader's state machine with its index
// and hash. Applies go on while it is encoded.
//
// A request whose Accept names application/octet-stream gets the snapshot
// streamed as it is encoded, so that its size matters to neither side:
// the index and version in headers, the hash and length, known only at
// the end, in trailers. Any other request gets the JSON answer of earlier
// releases, which holds the whole snapshot, in base64, in one body.
func (s *Handler) handleBackup(w http.ResponseWriter, r *http.Request) error {
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	sn, err := s.b.FSM().Snapshot()
	if err != nil {
		return err
	}
	if acceptsStream(r.Header.Values("Accept"), rpc.ContentTypeStream) {
		s.streamBackup(w, r, sn)
		return nil
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

// streamBackup writes sn as the body, with its trailers. Once the status
// is sent no error can be answered: a failure aborts the connection, so
// that the client sees a body cut short, without trailers.
func (s *Handler) streamBackup(w http.ResponseWriter, r *http.Request, sn *fsm.Snapshot) {
	h := w.Header()
	h.Set("Content-Type", rpc.ContentTypeStream)
	h.Set("Cache-Control", "no-store")
	h.Set(rpc.HeaderBackupIndex, strconv.FormatUint(sn.Index(), 10))
	h.Set(rpc.HeaderBackupVersion, version.String())
	h.Set("Trailer", rpc.TrailerBackupSha256+", "+rpc.TrailerBackupSize)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	start := time.Now()
	rc := http.NewResponseController(w)
	dw := &deadlineWriter{w: w, rc: rc, sum: sha256.New()}
	bw := bufio.NewWriterSize(dw, backupBuffer)
	n, err := sn.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	_ = rc.SetWriteDeadline(time.Time{})
	if err != nil {
		s.log.Warn("backup stream abandoned", "index", sn.Index(), "bytes", dw.n, "remote", r.RemoteAddr, "error", err)
		panic(http.ErrAbortHandler)
	}
	h.Set(rpc.TrailerBackupSha256, hex.EncodeToString(dw.sum.Sum(nil)))
	h.Set(rpc.TrailerBackupSize, strconv.FormatInt(n, 10))
	s.log.Info("backup streamed", "index", sn.Index(), "bytes", n, "duration", time.Since(start), "remote", r.RemoteAddr)
}

// deadlineWriter writes to the response, hashing what it writes, with a
// write deadline of backupStall from each write.
type deadlineWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sum hash.Hash
	n   int64
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	// Not every writer supports deadlines (an HTTP/2 test recorder);
	// the stream then just has none.
	_ = d.rc.SetWriteDeadline(time.Now().Add(backupStall))
	n, err := d.w.Write(p)
	d.sum.Write(p[:n])
	d.n += int64(n)
	return n, err
}

// acceptsStream reports whether the Accept header values name mediaType
// with a quality above zero and at least that of application/json.
// Wildcards do not count: a client asks for the stream by name, so
// clients written for the JSON answer keep getting it.
func acceptsStream(accept []string, mediaType string) bool {
	qStream, qJSON := -1.0, -1.0
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if qs, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(qs, 64); err != nil {
					continue
				}
			}
			switch mt {
			case mediaType:
				qStream = max(qStream, q)
			case rpc.ContentTypeJSON:
				qJSON = max(qJSON, q)
			}
		}
	}
	return qStream > 0 && qStream >= qJSON
}
