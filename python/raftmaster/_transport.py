"""The client's transport: the same rules as the Go client's (client/transport.go,
client/lanes.go, client/leadermove.go).

Every write carries a request id, "<lane uuid>/<sequence>", and every retry
of that write reuses it, so the cluster applies it once. A write sends no
attempt later than MAX_WRITE_RETRY (15 minutes) after its first, well
within the cluster's de-duplication window (30 minutes). A lane idle past
the window, whose identity the cluster forgot, is refused (unknown_client)
on its next write's first attempt, which applied nothing: the write goes
again as the first request of a new identity. A retry refused so raises
UnknownClient, since an earlier attempt may have applied. A follower
redirects (307) to the leader, whose address is remembered. Connection
errors and the retryable codes (no leader, not leader, unknown outcome,
unavailable) move on to the next address and retry with exponential backoff
and full jitter, honouring Retry-After, until the retry budget is spent; a
refused connection moves on at once and is named to the next node in
X-Raftmaster-Unreachable. An attempt that hangs makes the client ask the
nodes who leads; when another node does, the attempt is abandoned for it.
A write made under a session (see _session.py) carries its id in
X-Raftmaster-Session and takes its request ids from the session's own
lanes, since an identity is bound to the session of its first request.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import queue
import random
import socket
import ssl
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import quote, urlencode, urljoin, urlsplit

from . import errors

log = logging.getLogger("raftmaster")

# Headers (rpc/types.go, rpc/endpoints.go).
HEADER_REQUEST_ID = "X-Raftmaster-Request-Id"
HEADER_NODE = "X-Raftmaster-Node"
HEADER_UNREACHABLE = "X-Raftmaster-Unreachable"
HEADER_AUTHORIZATION = "Authorization"
# The session a write is made under (rpc/session.go).
HEADER_SESSION = "X-Raftmaster-Session"

# Transport limits (client/transport.go).
MAX_REDIRECTS = 5
BACKOFF_MIN = 0.050
BACKOFF_MAX = 2.0
DEFAULT_ATTEMPT_TIMEOUT = 5.0
MAX_RESPONSE_BYTES = 256 << 20
MAX_ERROR_BYTES = 64 << 10
#: How long a node that refused a connection is named as unreachable.
DEAD_REFUSAL = 2.0
#: How long a call keeps retrying when no leader answers (client.DefaultRetry).
DEFAULT_RETRY = 120.0
#: How long a client that has never connected to any of its addresses keeps
#: trying before a call raises NoContact (client.DefaultFirstContactTimeout).
DEFAULT_FIRST_CONTACT_TIMEOUT = 5.0
#: The least time an attempt at first contact waits for its connection.
MIN_CONNECT_WAIT = 0.5
#: How long the cluster remembers an identity's outcomes after its last
#: request (rpc.DedupWindow), and how long after its first attempt a write
#: may send its last (rpc.MaxWriteRetry): half the window, whatever the
#: client's retry budget.
DEDUP_WINDOW = 1800.0
MAX_WRITE_RETRY = DEDUP_WINDOW / 2

# Leader probes of a hanging attempt (client/leadermove.go).
LEADER_PROBE_AFTER = 0.300
LEADER_PROBE_EVERY = 0.150
LEADER_PROBE_TIMEOUT = 0.250

#: The paths of the job-scoped endpoints (rpc.Endpoints with Job set): served
#: at /v1/jobs/{job}/... for a job other than the default one.
JOB_SCOPED = frozenset({
    "/v1/dataset", "/v1/task/get", "/v1/task/finished", "/v1/task/failed", "/v1/task/renew",
    "/v1/savemodel", "/v1/allgather/join", "/v1/allgather/leave", "/v1/allgather/watch",
    "/v1/kv/get", "/v1/kv/cas", "/v1/kv/delete", "/v1/kv/delete-prefix", "/v1/kv/add", "/v1/kv/multi-set",
    "/v1/kv/append", "/v1/kv/compare-set", "/v1/kv/multi-get", "/v1/kv/num-keys", "/v1/kv/watch",
    "/v1/task/progress", "/v1/cursors", "/v1/weights",
})
#: The prefixes of the job-scoped endpoints whose paths name an object:
#: /v1/cursors/{id} and /v1/cursors/{id}/restore.
JOB_SCOPED_PREFIXES = ("/v1/cursors/",)

#: The job of the plain routes.
DEFAULT_JOB = "default"


def job_path(job: str, path: str) -> str:
    """Where a job-scoped endpoint of job is served (rpc.JobPath)."""
    return "/v1/jobs/" + job + (path[3:] if path.startswith("/v1") else path)


def normalize_addr(addr: str, tls: bool = False) -> str:
    """Turn "host:port" or "http(s)://host:port/" into "scheme://host:port".

    With tls (the client has an ssl_context), "host:port" means HTTPS and a
    plain-HTTP address is refused, so that a token never goes out in the
    clear, as the Go client does under WithTLS."""
    s = addr.strip()
    if not s:
        raise ValueError("raftmaster client: empty address")
    if "://" not in s:
        s = ("https://" if tls else "http://") + s
    u = urlsplit(s)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ValueError("raftmaster client: address %r: want host:port or http(s)://host:port" % addr)
    if tls and u.scheme != "https":
        raise ValueError("raftmaster client: address %r is plain HTTP, and the client uses TLS" % addr)
    return u.scheme + "://" + u.netloc


def parse_retry_after(v: Optional[str]) -> float:
    """Read a Retry-After header, in seconds or as an HTTP date."""
    if not v:
        return 0.0
    v = v.strip()
    if v.isdigit():
        return float(int(v)) if int(v) > 0 else 0.0
    try:
        t = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return 0.0
    if t is None:
        return 0.0
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return max((t - datetime.now(timezone.utc)).total_seconds(), 0.0)


class Endpoints:
    """Picks the address of the next attempt: the leader when known, else the addresses in turn."""

    def __init__(self, addrs: List[str]) -> None:
        self._lock = threading.Lock()
        self.addrs = list(addrs)
        self._next = 0
        self.leader = ""
        self._refused: Dict[str, float] = {}
        self._ids: Dict[str, str] = {}
        self._trusted: set = set()

    def answered(self, base: str, node_id: Optional[str]) -> None:
        if node_id:
            with self._lock:
                self._ids[base] = node_id

    def id_of(self, base: str) -> str:
        with self._lock:
            return self._ids.get(base, "")

    def count(self) -> int:
        with self._lock:
            return len(self.addrs)

    def snapshot(self) -> List[str]:
        with self._lock:
            return list(self.addrs)

    def refused_by(self, base: str) -> None:
        host = urlsplit(base).netloc
        if host:
            with self._lock:
                self._refused[host] = time.monotonic()

    def unreachable(self) -> str:
        """The nodes that refused a connection within DEAD_REFUSAL, comma separated, sorted."""
        now = time.monotonic()
        with self._lock:
            for host in [h for h, at in self._refused.items() if now - at > DEAD_REFUSAL]:
                del self._refused[host]
            return ",".join(sorted(self._refused))

    def pick(self) -> str:
        with self._lock:
            if self.leader:
                return self.leader
            return self.addrs[self._next % len(self.addrs)]

    def set_leader(self, base: str) -> None:
        with self._lock:
            self.leader = base

    def allowed(self, base: str) -> bool:
        """Whether base is one of the addresses the client was given, or a
        leader one of them reported: the token goes there and nowhere else."""
        with self._lock:
            return base in self.addrs or base in self._trusted

    def trust(self, base: str) -> None:
        with self._lock:
            self._trusted.add(base)

    def failed(self, base: str) -> None:
        """Move on from base, which could not serve a request."""
        with self._lock:
            if self.leader == base:
                self.leader = ""
            if self.addrs[self._next % len(self.addrs)] == base:
                self._next = (self._next + 1) % len(self.addrs)


class Lane:
    """One de-duplication identity and its last sequence number."""

    def __init__(self, ident: uuid.UUID) -> None:
        self.id = ident
        self.seq = 0

    def next(self) -> str:
        self.seq += 1
        return "%s/%d" % (self.id, self.seq)


class Lanes:
    """Hands every write in flight its own de-duplication identity, as the Go
    client does: the cluster remembers the last few request ids of each
    identity, so a write retried after many newer writes of other threads
    would otherwise be too old to tell. The first identity is the client's
    own id; the n-th is the name-based (SHA-1) UUID of str(n) in its
    namespace. A lane idle past the de-duplication window, whose identity
    the cluster forgot, takes the next one (renew)."""

    def __init__(self, base: uuid.UUID) -> None:
        self.base = base
        self._lock = threading.Lock()
        self._free: List[Lane] = []
        self._n = 0

    def _mint(self) -> uuid.UUID:
        self._n += 1
        if self._n == 1:
            return self.base
        return uuid.uuid5(self.base, str(self._n))

    def acquire(self) -> Lane:
        with self._lock:
            if self._free:
                return self._free.pop()
            return Lane(self._mint())

    def release(self, lane: Lane) -> None:
        with self._lock:
            self._free.append(lane)

    def renew(self, lane: Lane) -> None:
        """Give lane, whose identity the cluster no longer holds, a new one, whose next request is its first."""
        with self._lock:
            lane.id, lane.seq = self._mint(), 0


class Bound:
    """A session that writes are made under: its id, sent in
    X-Raftmaster-Session, and the de-duplication lanes of its writes. An
    identity is bound to the session of its first request, so each session
    has identities of its own."""

    def __init__(self, session_id: int, lanes: Lanes) -> None:
        self.id = session_id
        self.lanes = lanes


class Call:
    """One API call."""

    __slots__ = ("method", "path", "query", "body", "write", "timeout", "budget", "addr", "no_probe", "cancel",
                 "session", "final", "lanes")

    def __init__(self, method: str, path: str, *, query: Optional[Dict[str, str]] = None, body: Any = None,
                 write: bool = False, timeout: float = 0.0, budget: Optional[float] = None,
                 addr: str = "", no_probe: bool = False, cancel: Optional[threading.Event] = None,
                 session: Optional[Bound] = None,
                 final: Optional[Callable[[errors.RaftmasterError], bool]] = None,
                 lanes: Optional[Lanes] = None) -> None:
        self.method = method
        self.path = path
        self.query = query or {}
        self.body = body
        self.write = write
        self.timeout = timeout      # of each attempt; 0 means DEFAULT_ATTEMPT_TIMEOUT
        self.budget = budget        # for retries; None means the client's
        self.addr = addr            # one node only: no rotation, redirect or retry
        self.no_probe = no_probe    # keep the attempt on its node however long it waits
        self.cancel = cancel        # set to stop retrying (Cancelled); the client's close also stops it
        self.session = session      # a write's session: its header and lanes; None: the client's own lanes
        self.final = final          # an error it holds for is raised at once, though retryable
        self.lanes = lanes          # a write's identities, when neither the session's nor the client's


class Cancelled(errors.RaftmasterError):
    """A call stopped by its cancel event."""


class _AttemptError:
    __slots__ = ("err", "retry", "retry_after", "moved", "refused")

    def __init__(self, err: errors.RaftmasterError, retry: bool = False, retry_after: float = 0.0,
                 moved: bool = False, refused: bool = False) -> None:
        self.err = err
        self.retry = retry
        self.retry_after = retry_after
        self.moved = moved
        self.refused = refused


class _Inflight:
    """An attempt that the leader prober watches."""

    __slots__ = ("current", "next_probe", "conn", "moved")

    def __init__(self, current: str) -> None:
        self.current = current
        self.next_probe = time.monotonic() + LEADER_PROBE_AFTER
        self.conn: Optional[http.client.HTTPConnection] = None
        self.moved = False


_STALE_CONN = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
               ConnectionAbortedError, http.client.BadStatusLine)


class Transport:
    """Sends calls to the cluster with the Go client's rules."""

    def __init__(self, addrs: List[str], *, token: Optional[str], job: Optional[str],
                 ssl_context: Optional[ssl.SSLContext], retry: float,
                 first_contact: float = DEFAULT_FIRST_CONTACT_TIMEOUT) -> None:
        self.ep = Endpoints(addrs)
        self.first_contact = first_contact
        # Set once a connection to a node succeeded (TCP, and TLS for
        # https): from then on calls wait through outages, a full-cluster
        # restart included, for the retry budget.
        self.reached = False
        # Set while a call waits for a leader, so that the wait is logged once.
        self._waiting = False
        self.token = token
        self.job = job
        self.ssl_context = ssl_context
        self.retry = retry
        self.id = uuid.uuid4()
        self.lanes = Lanes(self.id)
        self.closed = threading.Event()
        self._pool: Dict[Tuple[str, str], List[http.client.HTTPConnection]] = {}
        self._pool_lock = threading.Lock()
        self._active: Dict[int, http.client.HTTPConnection] = {}
        # Leader probes.
        self._cond = threading.Condition()
        self._inflight: Dict[int, _Inflight] = {}
        self._prober: Optional[threading.Thread] = None
        self._probe_lock = threading.Lock()
        self._probe_running: Optional[threading.Event] = None
        self._probe_at = 0.0
        self._probe_asked: set = set()
        self._probe_results: Dict[str, Dict[str, Any]] = {}

    # Waiting.

    def sleep(self, seconds: float) -> bool:
        """Wait seconds, or until the client is closed; report whether the time passed."""
        if seconds <= 0:
            return not self.closed.is_set()
        return not self.closed.wait(seconds)

    def close(self) -> None:
        self.closed.set()
        with self._cond:
            self._cond.notify_all()
        with self._pool_lock:
            conns = [c for cs in self._pool.values() for c in cs] + list(self._active.values())
            self._pool.clear()
        for c in conns:
            _abort(c)
            c.close()

    # Calls.

    def route(self, path: str) -> str:
        if not self.job or (path not in JOB_SCOPED and not path.startswith(JOB_SCOPED_PREFIXES)):
            return path
        return job_path(quote(self.job, safe=""), path)

    def do(self, call: Call) -> Any:
        """Perform call and return its decoded answer (None for an empty one)."""
        payload = None
        if call.body is not None:
            payload = json.dumps(call.body, separators=(",", ":")).encode()
        lane = None
        req_id = ""
        # A write under a session uses the session's identities.
        lanes = call.lanes or (call.session.lanes if call.session is not None else self.lanes)
        if call.write:
            lane = lanes.acquire()
            req_id = lane.next()
        try:
            return self._do(call, payload, lanes, lane, req_id)
        finally:
            if lane is not None:
                lanes.release(lane)

    def _do(self, call: Call, payload: Optional[bytes], lanes: Lanes, lane: Optional[Lane], req_id: str) -> Any:
        budget = self.retry if call.budget is None else call.budget
        if call.write:
            # Every attempt of a write must reach the cluster well within
            # the de-duplication window of its first.
            budget = min(budget, MAX_WRITE_RETRY)
        start = time.monotonic()
        tried: Dict[str, str] = {}  # what each address did, until one connects
        refusals = 0
        attempt = 0
        first = call.write  # no attempt of the write has been sent yet
        while True:
            if self.closed.is_set():
                raise errors.ClientClosed()
            if call.cancel is not None and call.cancel.is_set():
                raise Cancelled("raftmaster client: %s cancelled" % call.path)
            base = call.addr or self.ep.pick()
            ok, out, ae = self._attempt(base, call, payload, req_id)
            if ok:
                if self._waiting:
                    self._waiting = False
                    log.info("the cluster answers again (%s)", base)
                return out
            assert ae is not None  # _attempt says why an attempt failed
            if self.closed.is_set():
                raise errors.ClientClosed()
            if not self.reached and not call.addr and self.first_contact > 0:
                tried[base] = _describe_failure(ae.err)
                if time.monotonic() - start >= self.first_contact and len(tried) >= self.ep.count():
                    raise _no_contact(self.first_contact, tried)
            if isinstance(ae.err, errors.UnknownClient) and lane is not None:
                if first:
                    # The lane was idle past the window and the cluster
                    # forgot its identity. The refusal applied nothing, and
                    # no other attempt of the write was ever sent, so the
                    # write goes again, at once, as the first request of a
                    # new identity.
                    lanes.renew(lane)
                    req_id = lane.next()
                    first = False
                    continue
                # A retry refused so may follow an attempt that was applied
                # before the cluster forgot the identity.
                ae.err.context = ("raftmaster client: %s %s: the write may or may not have applied "
                                  "(an earlier attempt may have, before the cluster forgot this client)"
                                  % (call.method, call.path))
                raise ae.err
            first = False
            if not ae.retry or call.addr or (call.final is not None and call.final(ae.err)):
                raise ae.err
            if not ae.moved:
                self.ep.failed(base)
            wait = random.uniform(0, min(BACKOFF_MAX, BACKOFF_MIN * (1 << min(attempt, 10))))
            if ae.retry_after > 0:
                wait = max(wait, min(ae.retry_after, BACKOFF_MAX))
            refusals = refusals + 1 if ae.refused else 0
            if ae.refused and refusals < self.ep.count():
                # A killed node: ask the next one at once. It holds the call
                # until a leader serves (naming this node as unreachable).
                wait = 0.0
            if self.reached and not ae.moved and not self._waiting:
                self._waiting = True
                log.info("waiting for the cluster's leader (%s on %s: %s; retrying for up to %gs)",
                         call.path, base, ae.err, budget)
            elapsed = time.monotonic() - start
            if elapsed >= budget:
                raise _giving_up(ae.err, "raftmaster client: %s %s: giving up after %d attempts in %.3fs"
                                 % (call.method, call.path, attempt + 1, elapsed))
            # Retry-After is honoured loosely: never past the budget.
            wait = min(wait, budget - elapsed)
            log.debug("retrying %s on %s (attempt %d, wait %.3fs): %s", call.path, base, attempt + 1, wait, ae.err)
            if call.cancel is not None:
                if call.cancel.wait(wait):
                    raise Cancelled("raftmaster client: %s cancelled" % call.path)
            elif not self.sleep(wait):
                raise errors.ClientClosed()
            attempt += 1

    def _attempt(self, base: str, call: Call, payload: Optional[bytes],
                 req_id: str) -> Tuple[bool, Any, Optional[_AttemptError]]:
        timeout = call.timeout or DEFAULT_ATTEMPT_TIMEOUT
        target = base + self.route(call.path)
        if call.query:
            target += "?" + urlencode(sorted(call.query.items()))
        current = base
        watch = None
        if not call.timeout and not call.addr and not call.no_probe:
            # Long polls set their own timeout and are expected to wait.
            watch = self._watch(base)
        try:
            redirects = 0
            while True:
                headers = {"Accept": "application/json"}
                if payload is not None:
                    headers["Content-Type"] = "application/json"
                if self.token:
                    headers[HEADER_AUTHORIZATION] = "Bearer " + self.token
                if req_id:
                    headers[HEADER_REQUEST_ID] = req_id
                if call.session is not None:
                    headers[HEADER_SESSION] = str(call.session.id)
                dead = self.ep.unreachable()
                if dead:
                    headers[HEADER_UNREACHABLE] = dead
                u = urlsplit(target)
                try:
                    conn, resp = self._send(u.scheme, u.netloc, call.method, _request_target(u), payload,
                                            headers, timeout, watch)
                except ConnectionRefusedError as e:
                    self.ep.refused_by(current)
                    return False, None, _AttemptError(_transport_error(call, target, e), retry=True, refused=True)
                except (OSError, http.client.HTTPException) as e:
                    if self.closed.is_set():
                        return False, None, _AttemptError(errors.ClientClosed())
                    if watch is not None and watch.moved:
                        return False, None, _AttemptError(
                            _transport_error(call, target, "another node took over as leader"), retry=True, moved=True)
                    return False, None, _AttemptError(_transport_error(call, target, e), retry=True)
                self.ep.answered(current, resp.getheader(HEADER_NODE))
                if resp.status in (307, 308):
                    loc = resp.getheader("Location") or ""
                    self._finish(u, conn, resp, MAX_ERROR_BYTES)
                    if call.addr:
                        return False, None, _AttemptError(errors.RaftmasterError(
                            "raftmaster client: %s redirected %s to %r" % (call.addr, call.path, loc)))
                    if redirects >= MAX_REDIRECTS:
                        return False, None, _AttemptError(errors.TransportError(
                            "raftmaster client: %s: more than %d redirects" % (call.path, MAX_REDIRECTS)), retry=True)
                    nxt = urlsplit(urljoin(target, loc)) if loc else None
                    if nxt is None or nxt.scheme not in ("http", "https") or not nxt.netloc:
                        return False, None, _AttemptError(errors.TransportError(
                            "raftmaster client: bad redirect %r from %s" % (loc, target)), retry=True)
                    if self.ssl_context is not None and nxt.scheme != "https":
                        return False, None, _AttemptError(errors.RaftmasterError(
                            "raftmaster client: refusing a redirect from %s to plain HTTP (%r): the client uses TLS"
                            % (target, loc)))
                    nxt_base = nxt.scheme + "://" + nxt.netloc
                    if self.token and not self.ep.allowed(nxt_base):
                        # The token goes only to the addresses the client
                        # was given and the leader they report, never to
                        # any host a redirect names.
                        why = self._check_leader(current, nxt_base)
                        if why:
                            return False, None, _AttemptError(errors.TransportError(
                                "raftmaster client: refusing the redirect of %s from %s to %s, with the client's "
                                "token: it is not an address the client was given, nor the leader the cluster "
                                "reports (%s)" % (call.path, current, nxt_base, why)), retry=True)
                        self.ep.trust(nxt_base)
                    current = nxt_base
                    self.ep.set_leader(current)
                    if watch is not None:
                        with self._cond:
                            watch.current = current
                    log.debug("redirected %s from %s to %s", call.path, target, nxt.geturl())
                    target = nxt.geturl()
                    redirects += 1
                    continue
                ok, out, ae = self._answer(u, conn, resp, call, target)
                if ok and call.write and not call.addr:
                    # The node that accepted a write is the leader.
                    self.ep.set_leader(u.scheme + "://" + u.netloc)
                return ok, out, ae
        finally:
            if watch is not None:
                self._unwatch(watch)

    def _send(self, scheme: str, netloc: str, method: str, path: str, payload: Optional[bytes],
              headers: Dict[str, str], timeout: float, watch: Optional[_Inflight]):
        """Send one request and read the response's status and headers. A
        pooled connection that the server closed meanwhile is replaced once."""
        for fresh in (False, True):
            conn, reused = self._conn(scheme, netloc, timeout, fresh)
            key = id(conn)
            with self._pool_lock:
                self._active[key] = conn
            if watch is not None:
                with self._cond:
                    watch.conn = conn
            try:
                if conn.sock is None:
                    self._connect(conn, timeout)
                conn.request(method, path, body=payload, headers=headers)
                return conn, conn.getresponse()
            except _STALE_CONN:
                conn.close()
                if reused and not (watch is not None and watch.moved) and not self.closed.is_set():
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            finally:
                with self._pool_lock:
                    self._active.pop(key, None)
        raise AssertionError("unreachable")

    def _connect(self, conn: http.client.HTTPConnection, timeout: float) -> None:
        """Connect conn (TCP, and TLS for https). At first contact a node
        that takes long to connect to is given up, so that every address is
        tried within the first-contact timeout; once connected, the
        attempt's own timeout applies."""
        if self.reached or self.first_contact <= 0:
            conn.connect()
            self.reached = True
            return
        wait = min(timeout, max(self.first_contact / max(self.ep.count(), 1), MIN_CONNECT_WAIT))
        conn.timeout = wait
        try:
            conn.connect()
        except (socket.timeout, TimeoutError) as e:
            raise _NoConnection("no connection within %gs" % wait) from e
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        self.reached = True

    def _conn(self, scheme: str, netloc: str, timeout: float, fresh: bool):
        if not fresh:
            with self._pool_lock:
                idle = self._pool.get((scheme, netloc))
                if idle:
                    conn = idle.pop()
                    if conn.sock is not None:
                        conn.sock.settimeout(timeout)
                    conn.timeout = timeout
                    return conn, True
        if scheme == "https":
            ctx = self.ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(netloc, timeout=timeout, context=ctx), False
        return http.client.HTTPConnection(netloc, timeout=timeout), False

    def _finish(self, u, conn, resp, limit: int) -> bytes:
        """Read at most limit bytes of the body; keep the connection when the body was read whole."""
        body = resp.read(limit)
        if resp.isclosed() and not resp.will_close and not self.closed.is_set():
            with self._pool_lock:
                self._pool.setdefault((u.scheme, u.netloc), []).append(conn)
        else:
            conn.close()
        return body

    def _answer(self, u, conn, resp, call: Call, target: str) -> Tuple[bool, Any, Optional[_AttemptError]]:
        if 200 <= resp.status < 300:
            try:
                body = self._finish(u, conn, resp, MAX_RESPONSE_BYTES + 1)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                # Cut off mid-answer: the call is idempotent, ask again.
                return False, None, _AttemptError(errors.TransportError(
                    "raftmaster client: reading %s answer: %s" % (call.path, e)), retry=True)
            if len(body) > MAX_RESPONSE_BYTES:
                return False, None, _AttemptError(errors.RaftmasterError(
                    "raftmaster client: %s answer exceeds %d bytes" % (call.path, MAX_RESPONSE_BYTES)))
            if not body.strip():
                return True, None, None
            try:
                return True, json.loads(body), None
            except ValueError as e:
                return False, None, _AttemptError(errors.RaftmasterError(
                    "raftmaster client: decoding %s answer: %s" % (call.path, e)))
        read_failed = False
        try:
            body = self._finish(u, conn, resp, MAX_ERROR_BYTES)
        except (OSError, http.client.HTTPException):
            conn.close()
            body, read_failed = b"", True
        code = message = applied_at = ""
        finish = None
        more_finish: List[Optional[errors.FinishOutcome]] = []
        try:
            doc = json.loads(body)
            if isinstance(doc, dict) and isinstance(doc.get("code"), str):
                code = doc["code"]
                message = str(doc.get("message") or "")
                applied_at = str(doc.get("applied_at") or "")
                finish = errors.finish_from_wire(doc.get("finish"))
                more_finish = [errors.finish_from_wire(o) for o in doc.get("more_finish") or []]
        except ValueError:
            pass
        if not code:
            # Not one of ours: a proxy, or a connection cut mid-answer.
            code = "internal"
            if resp.status in (502, 503, 504) or read_failed:
                code = "unavailable"
            message = body.decode("utf-8", "replace").strip() or "%d %s" % (resp.status, resp.reason)
        err = errors.from_wire(code, message, resp.status, applied_at)
        err.finish = finish
        err.more_finish = more_finish
        return False, None, _AttemptError(err, retry=err.retryable and bool(err.code),
                                          retry_after=parse_retry_after(resp.getheader("Retry-After")))

    # Leader probes (client/leadermove.go): one daemon thread per client
    # watches the attempts that wait, asks the nodes who leads once an
    # attempt has waited LEADER_PROBE_AFTER, and abandons it for another
    # leader.

    def _watch(self, base: str) -> _Inflight:
        w = _Inflight(base)
        with self._cond:
            self._inflight[id(w)] = w
            if self._prober is None:
                self._prober = threading.Thread(target=self._probe_loop, name="raftmaster-leader-probe", daemon=True)
                self._prober.start()
            self._cond.notify_all()
        return w

    def _unwatch(self, w: _Inflight) -> None:
        with self._cond:
            self._inflight.pop(id(w), None)

    def _probe_loop(self) -> None:
        while not self.closed.is_set():
            with self._cond:
                now = time.monotonic()
                due = [w for w in self._inflight.values() if w.next_probe <= now]
                if not due:
                    nxt = min((w.next_probe for w in self._inflight.values()), default=None)
                    self._cond.wait(None if nxt is None else max(nxt - now, 0.001))
                    continue
            for w in due:
                leader = self._other_leader(w.current)
                with self._cond:
                    if id(w) not in self._inflight:
                        continue
                    if leader:
                        log.debug("abandoning an attempt to %s for a new leader, %s", w.current, leader)
                        self.ep.set_leader(leader)
                        w.moved = True
                        self._inflight.pop(id(w), None)
                        if w.conn is not None:
                            _abort(w.conn)
                    else:
                        w.next_probe = time.monotonic() + LEADER_PROBE_EVERY

    def _other_leader(self, current: str) -> str:
        """The base URL of a leader other than current, or "" while current
        still answers as the leader or no other leader is known."""
        statuses = self._probe_all(current)
        st = statuses.get(current)
        if st is not None and st.get("state") == "Leader" and st.get("ready"):
            return ""
        current_id = st.get("node_id", "") if st is not None else self.ep.id_of(current)
        for base, s in statuses.items():
            leader = s.get("leader") or {}
            if base == current:
                continue
            if s.get("state") == "Leader" and s.get("ready") and s.get("node_id") != current_id:
                return base
            if leader.get("api_addr") and leader.get("id") != current_id:
                try:
                    addr = normalize_addr(leader["api_addr"], tls=self.ssl_context is not None)
                except ValueError:
                    continue
                if addr != current:
                    # A node the token goes to reports it as the leader.
                    self.ep.trust(addr)
                    return addr
        return ""

    def _probe_all(self, current: str) -> Dict[str, Dict[str, Any]]:
        """Ask current and every known node for its own status, in parallel.
        A round younger than LEADER_PROBE_EVERY/2 is reused."""
        while True:
            with self._probe_lock:
                running = self._probe_running
                if running is None:
                    if current in self._probe_asked and time.monotonic() - self._probe_at < LEADER_PROBE_EVERY / 2:
                        return self._probe_results
                    self._probe_running = running = threading.Event()
                    break
            running.wait()
        addrs = self.ep.snapshot()
        if current not in addrs:
            addrs.append(current)
        answers: "queue.Queue[Tuple[str, Optional[Dict[str, Any]]]]" = queue.Queue()
        for a in addrs:
            threading.Thread(target=lambda a=a: answers.put((a, self._stale_status(a))), daemon=True).start()
        # The round ends when every other node has answered; the node being
        # waited on counts only if it answers by then, unless the others
        # name a leader and its own id is unknown.
        res: Dict[str, Dict[str, Any]] = {}
        id_known = self.ep.id_of(current) != ""
        others_left, current_left, named = len(addrs) - 1, True, False
        while others_left > 0 or (current_left and named and not id_known):
            a, st = answers.get()
            if a == current:
                current_left = False
            else:
                others_left -= 1
                named = named or (st is not None and (st.get("state") == "Leader"
                                                      or bool((st.get("leader") or {}).get("id"))))
            if st is not None:
                res[a] = st
        with self._probe_lock:
            self._probe_at, self._probe_asked, self._probe_results = time.monotonic(), set(addrs), res
            self._probe_running = None
        running.set()
        return res

    def _check_leader(self, base: str, nxt: str) -> str:
        """Ask the node at base, which the token may go to, for its own
        status; return "" when the leader it names is at nxt, else why not."""
        st = self._stale_status(base)
        if st is None:
            return "%s did not answer its status" % base
        addr = (st.get("leader") or {}).get("api_addr")
        if not addr:
            return "%s knows no leader" % base
        try:
            leader = normalize_addr(addr, tls=self.ssl_context is not None)
        except ValueError as e:
            return str(e)
        if leader != nxt:
            return "%s reports the leader at %s" % (base, leader)
        return ""

    def _stale_status(self, base: str) -> Optional[Dict[str, Any]]:
        u = urlsplit(base)
        if u.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                u.netloc, timeout=LEADER_PROBE_TIMEOUT, context=self.ssl_context or ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(u.netloc, timeout=LEADER_PROBE_TIMEOUT)
        headers = {"Accept": "application/json"}
        if self.token:
            headers[HEADER_AUTHORIZATION] = "Bearer " + self.token
        try:
            conn.request("GET", "/v1/status?stale", headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                return None
            doc = json.loads(resp.read(MAX_ERROR_BYTES))
            return doc if isinstance(doc, dict) else None
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            conn.close()


class _NoConnection(OSError):
    """An attempt at first contact whose connection took too long."""


def _describe_failure(err: BaseException) -> str:
    """Say in a few words what a failed attempt's error was: a refused
    connection, no connection in time, a TLS or name-resolution error, or
    the error itself."""
    cause = err.__cause__ if err.__cause__ is not None else err
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, _NoConnection):
        return str(cause)
    if isinstance(cause, socket.gaierror):
        return "cannot resolve host: %s" % (cause.strerror or cause)
    if isinstance(cause, ssl.SSLCertVerificationError):
        return "TLS error: %s" % (cause.verify_message or cause)
    if isinstance(cause, ssl.SSLError):
        return "TLS error: %s" % (cause.reason or cause)
    if isinstance(cause, ConnectionResetError):
        return "connection reset (a TLS port, or not a raftmaster node?)"
    if isinstance(cause, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(err, errors.RaftmasterError) and err.status:
        return "answered HTTP %d: %s" % (err.status, err.message)
    return str(cause)


def _no_contact(first_contact: float, tried: Dict[str, str]) -> errors.NoContact:
    """NoContact, naming each address and what it did."""
    parts = ["%s: %s" % (urlsplit(a).netloc or a, what) for a, what in tried.items()]
    return errors.NoContact("raftmaster client: no address of the cluster answered within %gs: %s "
                            "(check the addresses, and that the cluster runs)" % (first_contact, "; ".join(parts)))


def _request_target(u) -> str:
    return (u.path or "/") + ("?" + u.query if u.query else "")


def _abort(conn: http.client.HTTPConnection) -> None:
    """Make a request blocked on conn fail at once."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _transport_error(call: Call, target: str, cause) -> errors.TransportError:
    e = errors.TransportError("raftmaster client: %s %s: %s" % (call.method, target, cause))
    if isinstance(cause, BaseException):
        e.__cause__ = cause
    return e


def _giving_up(err: errors.RaftmasterError, context: str) -> errors.RaftmasterError:
    """The error of a call whose retry budget ran out: err, saying how long the client tried."""
    err.context = context
    return err
