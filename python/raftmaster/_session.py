"""The client's session (protocol level 6, rpc/session.go): opened at the
first write, kept alive by a daemon thread, closed by Client.close.

The tasks a client leases under its session are held by it: they need no
lease renewal, and they come back to the job's queue in the one log entry
that ends the session, when the client closes it or when the cluster's
leader has had no keep-alive from it for its TTL. The register keys it
writes with ``attach`` are deleted then too, and a save-model lease granted
under it is released.

The keep-alives carry the progress of the held tasks (records consumed):
the leader takes back a held task whose records have not grown for its
job's task timeout.

A cluster below protocol level 6 (a release before sessions, or one not
upgraded yet) has none: the client works without one, as before, and asks
again every ASK_AGAIN seconds.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import errors
from ._duration import format_duration, parse_duration
from ._transport import Bound, Call, Cancelled, Lanes, Transport

log = logging.getLogger("raftmaster")

#: The TTL of a session whose client names none (rpc.DefaultSessionTTL), in seconds.
DEFAULT_SESSION_TTL = 5.0
#: The least and the most TTL a session may have (fsm.MinSessionTTL, fsm.MaxSessionTTL), in seconds.
MIN_SESSION_TTL = 1.0
MAX_SESSION_TTL = 3600.0
#: The protocol level sessions need (rpc.SessionProtocol).
SESSION_PROTOCOL = 6
#: How long a client whose cluster has no sessions yet waits before it asks again, in seconds.
ASK_AGAIN = 60.0
#: How long a close of the session keeps retrying, at most, in seconds.
CLOSE_BUDGET = 5.0
#: The environment variable naming a directory where each client records
#: its open session, a file named "<id>.session", so that a supervisor (the
#: torchrun agent) can close the sessions of the processes it stopped.
SESSION_DIR_ENV = "RAFTMASTER_SESSION_DIR"
#: The suffix of the files of that directory.
SESSION_FILE_SUFFIX = ".session"

# The least pause between two keep-alives, in seconds.
_KEEPALIVE_FLOOR = 0.1


def predates_sessions(e: errors.RaftmasterError) -> bool:
    """Whether e, the answer to a session call, says that the cluster has no
    sessions: a release before them (no such endpoint), or a cluster below
    protocol level 6 (upgrade pending)."""
    if e.code in ("not_found", "method_not_allowed", "upgrade_pending"):
        return True
    return isinstance(e, errors.Unavailable) and "not upgraded" in (e.message or "")


class Session(Bound):
    """An open session of this process: its id, TTL (seconds) and
    de-duplication lanes, and the thread that keeps it alive."""

    def __init__(self, session_id: int, ttl: float, lanes: Lanes, control: Lanes) -> None:
        super().__init__(session_id, lanes)
        self.ttl = ttl
        self.control = control  # the identity that opened it, and closes it
        self.pid = os.getpid()
        self.ended = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.file = ""


#: Progress of a held task: (job, task id, epoch) -> records consumed.
Progress = Dict[Tuple[str, int, int], int]


class Sessions:
    """The session of one client: at most one open at a time, opened at the
    first write, replaced by a new one (with new identities) after it
    ended."""

    def __init__(self, t: Transport, ttl: Optional[float], enabled: bool, session_dir: Optional[str],
                 job: str, held: Callable[[int], Progress]) -> None:
        self._t = t
        self.enabled = enabled
        self._ttl = ttl  # None: the cluster's default
        self._dir = os.environ.get(SESSION_DIR_ENV, "") if session_dir is None else session_dir
        self._job = job
        self._held = held  # the progress of the readers' held tasks, by session id
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._current: Optional[Session] = None
        self._ask_at = 0.0
        self._closed = False
        self._progress: Dict[int, Progress] = {}
        self._dir_failed = False
        self._opens = 0

    @property
    def current_id(self) -> Optional[int]:
        s = self._current
        return s.id if s is not None and not s.ended.is_set() else None

    def get(self) -> Optional[Session]:
        """The open session, opened now when there is none; None when the
        client has no sessions or the cluster has none (yet)."""
        if not self.enabled:
            return None
        s = self._current
        if s is not None and not s.ended.is_set():
            return s
        if time.monotonic() < self._ask_at:
            return None
        with self._open_lock:
            s = self._current
            if s is not None and not s.ended.is_set():
                return s
            if time.monotonic() < self._ask_at:
                return None
            return self._open()

    def _open(self) -> Optional[Session]:
        if self._closed:
            raise errors.ClientClosed()
        body: Dict[str, Any] = {}
        if self._ttl is not None:
            body["ttl"] = format_duration(self._ttl)
        # Each opening has an identity of its own, which closes the session
        # too: one refused by a cluster without sessions was never held,
        # and a next request under it would be refused as unknown.
        self._opens += 1
        control = Lanes(uuid.uuid5(self._t.id, "open/%d" % self._opens))
        try:
            out = self._t.do(Call("POST", "/v1/sessions", body=body, write=True, final=predates_sessions,
                                  lanes=control)) or {}
        except errors.ClientClosed:
            raise
        except errors.RaftmasterError as e:
            if predates_sessions(e):
                log.debug("the cluster has no sessions (%s): the client works without one, and asks again in %gs",
                          e, ASK_AGAIN)
            elif isinstance(e, errors.Forbidden):
                log.warning("the cluster does not let this client open a session (%s): it works without one, "
                            "and asks again in %gs", e, ASK_AGAIN)
            else:
                raise
            self._ask_at = time.monotonic() + ASK_AGAIN
            return None
        sid = int(out.get("session") or 0)
        if sid <= 0:
            raise errors.RaftmasterError("raftmaster client: the answer to opening a session names none: %r" % (out,))
        ttl = out.get("ttl")
        ttl_s = parse_duration(ttl) if isinstance(ttl, str) and ttl else 0.0
        if ttl_s <= 0:
            ttl_s = self._ttl or DEFAULT_SESSION_TTL
        s = Session(sid, ttl_s, Lanes(uuid.uuid5(self._t.id, "session/%d" % sid)), control)
        with self._lock:
            closed = self._closed
            if not closed:
                self._current = s
        if closed:
            # The client was closed while the session opened.
            self._close(s)
            raise errors.ClientClosed()
        log.debug("session %d open, TTL %gs", sid, ttl_s)
        self._publish(s)
        s.thread = threading.Thread(target=self._keep, args=(s,), name="raftmaster-session-%d" % sid, daemon=True)
        s.thread.start()
        return s

    def ended(self, s: Session, why: Any) -> None:
        """Forget s, which the cluster says has ended: the next write opens a new session."""
        if s.ended.is_set():
            return
        log.warning("session %d ended (%s): its tasks were handed back; the next call opens a new session", s.id, why)
        self._end(s)

    def _end(self, s: Session) -> None:
        s.ended.set()
        with self._lock:
            if self._current is s:
                self._current = None
            self._progress.pop(s.id, None)
        self._unpublish(s)

    def close(self) -> None:
        """Close the session at once (its tasks come back, its attached keys
        go) and stop keeping it alive; no session opens after."""
        with self._lock:
            self._closed = True
            s = self._current
        if s is not None:
            self._close(s)

    def _close(self, s: Session) -> None:
        self._end(s)
        if s.pid != os.getpid():
            return  # another process's session, inherited through fork
        try:
            self._t.do(Call("DELETE", "/v1/sessions/%d" % s.id, write=True, lanes=s.control,
                            budget=min(self._t.retry, CLOSE_BUDGET)))
            log.debug("session %d closed", s.id)
        except errors.RaftmasterError as e:
            log.warning("cannot close session %d (it ends after its TTL, %gs): %s", s.id, s.ttl, e)

    # Progress of held tasks.

    def report(self, session_id: int, job: str, task: int, epoch: int, records: int) -> None:
        with self._lock:
            if session_id == self.current_id:
                self._progress.setdefault(session_id, {})[(job, task, epoch)] = records

    def forget(self, session_id: int, job: str, task: int, epoch: int) -> None:
        with self._lock:
            p = self._progress.get(session_id)
            if p is not None:
                p.pop((job, task, epoch), None)

    def progress(self, s: Session) -> List[Dict[str, Any]]:
        """The progress of the tasks s holds, for its keep-alive."""
        with self._lock:
            p = dict(self._progress.get(s.id) or {})
        try:
            p.update(self._held(s.id))
        except Exception as e:  # a reader being closed; never stop the keep-alives for it
            log.debug("session %d: reading the readers' progress: %s", s.id, e)
        return [{"job": job, "task": task, "epoch": epoch, "records": records}
                for (job, task, epoch), records in sorted(p.items())]

    # Keep-alives.

    def _keep(self, s: Session) -> None:
        every = s.ttl / 3
        failing = False
        while not s.ended.wait(every):
            body: Dict[str, Any] = {}
            progress = self.progress(s)
            if progress:
                body["progress"] = progress
            try:
                out = self._t.do(Call("POST", "/v1/sessions/%d/keepalive" % s.id, body=body, budget=s.ttl,
                                      cancel=s.ended)) or {}
            except (errors.ClientClosed, Cancelled):
                return
            except errors.SessionExpired as e:
                self.ended(s, e)
                return
            except errors.RaftmasterError as e:
                # Keep trying: a new leader gives the session a grace of its
                # TTL. Said once until they are answered again.
                (log.debug if failing else log.warning)("session %d: keep-alive failed: %s", s.id, e)
                failing = True
                every = max(s.ttl / 6, _KEEPALIVE_FLOOR)
                continue
            if failing:
                failing = False
                log.info("session %d: keep-alives answered again", s.id)
            left = out.get("ttl")
            left_s = parse_duration(left) if isinstance(left, str) and left else s.ttl
            every = max(min(left_s, s.ttl) / 3, _KEEPALIVE_FLOOR)

    # The session directory (SESSION_DIR_ENV).

    def _publish(self, s: Session) -> None:
        if not self._dir:
            return
        path = os.path.join(self._dir, "%d%s" % (s.id, SESSION_FILE_SUFFIX))
        tmp = path + ".tmp"
        try:
            with open(tmp, "w") as f:
                json.dump({"session": s.id, "pid": s.pid, "job": self._job}, f)
            os.replace(tmp, path)
            s.file = path
        except OSError as e:
            if not self._dir_failed:
                self._dir_failed = True
                log.warning("cannot record session %d in %s (%s): %s", s.id, self._dir, SESSION_DIR_ENV, e)

    def _unpublish(self, s: Session) -> None:
        if s.file and s.pid == os.getpid():
            try:
                os.remove(s.file)
            except OSError:
                pass
            s.file = ""


def recorded_sessions(directory: str) -> List[int]:
    """The ids of the sessions recorded in directory (SESSION_DIR_ENV), in
    order: those of the processes that use it, and have not closed them."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    ids = []
    for name in names:
        if name.endswith(SESSION_FILE_SUFFIX) and name[:-len(SESSION_FILE_SUFFIX)].isdigit():
            ids.append(int(name[:-len(SESSION_FILE_SUFFIX)]))
    return sorted(ids)


def check_ttl(ttl: Any) -> Tuple[bool, Optional[float]]:
    """Read a client's session_ttl: (enabled, TTL in seconds or None for the
    cluster's default). 0 and False disable sessions."""
    from ._duration import to_nanoseconds
    if ttl is None:
        return True, None
    if ttl is False:
        return False, None
    if ttl is True:
        raise TypeError("raftmaster client: session_ttl is a number of seconds, a timedelta, None or False")
    s = to_nanoseconds(ttl) / 1e9
    if s == 0:
        return False, None
    if s < MIN_SESSION_TTL or s > MAX_SESSION_TTL:
        raise ValueError("raftmaster client: session_ttl %r is out of [%gs, %gs] (0 or False: no session)"
                         % (ttl, MIN_SESSION_TTL, MAX_SESSION_TTL))
    return True, s
