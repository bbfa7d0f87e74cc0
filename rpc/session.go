package rpc

import "time"

// Sessions (protocol level 6). A client process opens one session and
// keeps it alive; the tasks it leases under it, the save-model lease it is
// granted under it and the register keys it attaches to it are released in
// the one log entry that ends it: when it is closed, or when the leader
// has had no keep-alive for its TTL. Keep-alives are served by the leader
// from memory and are not replicated.
const (
	// PathSessions opens a session (POST) and lists them (GET).
	PathSessions = "/v1/sessions"
	// PathSessionKeepAlive keeps session {id} alive (POST).
	PathSessionKeepAlive = "/v1/sessions/{id}/keepalive"
	// PathSession closes session {id} (DELETE).
	PathSession = "/v1/sessions/{id}"

	// SessionParam names the session in the paths above.
	SessionParam = "id"

	// HeaderSession carries, on a write, the id of the session it is made
	// under. The request's identity (HeaderRequestID) is bound to the
	// session of its first request.
	HeaderSession = "X-Raftmaster-Session"

	// ParamAttach, set to true on a register write made under a session,
	// attaches the keys it stores to the session, which deletes them when
	// it ends.
	ParamAttach = "attach"

	// DefaultSessionTTL is the TTL of a session whose opening names none
	// (serve --session-ttl), and the clients' default.
	DefaultSessionTTL = 5 * time.Second
	// SessionProtocol is the protocol level sessions need.
	SessionProtocol = 6
)

// OpenSessionRequest opens a session. TTL is how long the session lives
// without a keep-alive; zero means the server's default.
type OpenSessionRequest struct {
	TTL Duration `json:"ttl,omitempty"`
}

// OpenSessionResponse names the session opened and its TTL: keep it alive
// well within the TTL (the clients send a keep-alive every third of it).
type OpenSessionResponse struct {
	Session   uint64    `json:"session"`
	TTL       Duration  `json:"ttl"`
	AppliedAt time.Time `json:"applied_at"`
}

// SessionProgress is how far a trainer has read a task it holds under its
// session: records consumed so far. The leader revokes a held task whose
// records have not grown for the job's task timeout.
type SessionProgress struct {
	Job     string `json:"job"`
	Task    int    `json:"task"`
	Epoch   int    `json:"epoch"`
	Records int64  `json:"records"`
}

// KeepAliveRequest keeps a session alive, with the progress of the tasks
// it holds.
type KeepAliveRequest struct {
	Progress []SessionProgress `json:"progress,omitempty"`
}

// KeepAliveResponse says how long the session lives from the answer
// without another keep-alive.
type KeepAliveResponse struct {
	TTL Duration `json:"ttl"`
}

// CloseSessionResponse says whether the session was open (false: it had
// ended already).
type CloseSessionResponse struct {
	Closed    bool      `json:"closed"`
	AppliedAt time.Time `json:"applied_at"`
}

// SessionTask is a task a session holds.
type SessionTask struct {
	Job  string   `json:"job"`
	Meta TaskMeta `json:"meta"`
}

// Session describes an open session, as the leader sees it.
type Session struct {
	Session uint64   `json:"session"`
	TTL     Duration `json:"ttl"`
	// Remaining is how long the session lives without another
	// keep-alive, by the leader's clock.
	Remaining Duration `json:"remaining"`
	// Opened is the FSM time of its opening.
	Opened time.Time `json:"opened"`
	// Age is how long ago it was opened, by the leader's clock.
	Age   Duration      `json:"age"`
	Tasks []SessionTask `json:"tasks,omitempty"`
	// Keys counts the register keys attached to it.
	Keys int `json:"keys"`
}

// SessionsResponse lists the open sessions in id order.
type SessionsResponse struct {
	Sessions []Session `json:"sessions"`
}
