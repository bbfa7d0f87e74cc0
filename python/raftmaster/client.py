"""The client of a raftmaster cluster, for trainers: data dispatch,
save-model lease and allgather, over the HTTP/JSON API."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import numbers
import os
import ssl
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    Union, overload)

from . import errors
from .errors import FinishOutcome
from ._duration import Seconds, format_duration, parse_duration, to_nanoseconds
from ._patterns import warn_other_patterns
from ._session import (CLOSE_BUDGET, DEFAULT_SESSION_TTL, SESSION_FILE_SUFFIX, SESSION_PROTOCOL, Progress, Session,
                       Sessions, check_ttl, recorded_sessions)
from ._transport import (DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_FIRST_CONTACT_TIMEOUT, DEFAULT_JOB, DEFAULT_RETRY, Call,
                         Transport, normalize_addr)

if TYPE_CHECKING:  # records imports this module
    from .records import PassRecords

log = logging.getLogger("raftmaster")

#: The allgather group timeout when join is given none (client.DefaultTimeout): ten minutes.
DEFAULT_TIMEOUT = 600.0

# How long one allgather watch may wait on the server before it is asked
# again, and the slack added to it for the attempt's deadline.
_WATCH_WAIT = 30.0
_WATCH_SLACK = 15.0


@dataclass(frozen=True)
class TaskMeta:
    """One dispatch of a task: its id and the epoch of the lease."""
    id: int
    epoch: int


@dataclass(frozen=True)
class Chunk:
    """One RecordIO chunk of a task: file, byte offset of the chunk header and record count."""
    path: str
    offset: int
    records: int


@dataclass(frozen=True)
class Task:
    """A leased task: read its chunks, then report it finished or failed,
    and renew the lease well before it runs out (a task held by the
    client's session needs no renewal: report its progress instead)."""
    meta: TaskMeta
    chunks: List[Chunk] = field(default_factory=list)
    #: The pass the task belongs to: the one asked for, or the one before
    #: while the cluster finishes it (a task of it came back).
    pass_id: int = 0
    #: How long the lease lasted when the cluster answered, in seconds; 0
    #: when the server did not say.
    lease: float = 0.0
    #: The FSM time the lease was granted at (RFC 3339); a retried request
    #: gets the first answer's.
    applied_at: str = ""
    #: The id of the client's session that holds the task, or 0 when the
    #: task was leased with a deadline. A held task needs no renewal: it
    #: comes back when the session ends, or when its progress
    #: (Client.report_progress) stalls for the job's task timeout.
    session: int = 0
    #: How many of the task's first records a restored cursor counts as
    #: trained: read only records [skip, count) of it, and count consumed
    #: offsets from its record 0 (Client.restore_cursor).
    skip: int = 0
    #: The job's dataset seed (0 when none was recorded: a cluster below
    #: protocol level 8), which a shuffle of the task's records seeds its
    #: generator from with the pass and the task's id (Client.records).
    seed: int = 0
    #: The name of the mixture source the task belongs to (a dataset set
    #: with ``sources``); None for a dataset of one source.
    source: Optional[str] = None
    #: How the finish that the get_task which leased it carried
    #: (``finished``) went; None when it carried none.
    finish: Optional[errors.FinishOutcome] = None

    @property
    def record_count(self) -> int:
        """The number of records of the task, over its chunks."""
        return sum(c.records for c in self.chunks)


@dataclass(frozen=True)
class SaveModelGrant:
    """The answer to request_save_model_lease."""
    #: Whether the caller holds the save-model lease.
    granted: bool
    #: How long the caller holds it from the answer, in seconds: the block
    #: asked for, or less when the request was retried after the cluster
    #: had applied it (its answer lost), since the lease started then. 0
    #: when not granted, or when the server did not say (a release before
    #: it): then count on no more than the block from the call.
    lease: float = 0.0


@dataclass(frozen=True)
class DatasetResult:
    """The answer to set_dataset. ``ignored`` is True when a dataset was
    already set: the first one counts. ``current_patterns`` are the globs
    the job's dataset was set with (when ignored, another call's); empty
    when the cluster does not know them (a dataset given as chunks, or set
    before the cluster reached protocol level 4). ``shuffle`` and ``seed``
    are the order of the job's dataset (when ignored, another call's):
    each pass in the permutation of (seed, pass), or in id order; seed 0
    when none was recorded (a cluster below protocol level 8)."""
    ignored: bool
    files: int
    chunks: int
    tasks: int
    current_patterns: Tuple[str, ...] = ()
    shuffle: bool = False
    seed: int = 0


class AllgatherResult(NamedTuple):
    """The outcome of an allgather join: every member's data in join order
    (decoded from JSON) and this member's index in it."""
    data: List[Any]
    rank: int


@dataclass(frozen=True)
class KVValue:
    """What a key of a job's register holds."""
    #: Whether the key exists.
    found: bool
    #: The key's value; None when it does not exist.
    value: Optional[bytes]
    #: The version of the value: give it to kv_cas to replace it. It is 0
    #: when the key does not exist, and no key of any job is ever given a
    #: version again, so it is a fencing token.
    version: int


@dataclass(frozen=True)
class KVWatchResult(KVValue):
    """The outcome of kv_watch: what the key holds, the change waited for,
    or, when ``timed_out``, the key as it is when the timeout passed."""
    #: Whether the timeout passed with the key unchanged: still at the
    #: version given, or still absent for version 0.
    timed_out: bool = False


@dataclass(frozen=True)
class KVResult:
    """The outcome of kv_cas: whether the value was stored, and the key
    afterwards: the value stored and its new version when it was, else the
    key's current value and version."""
    swapped: bool
    found: bool
    value: Optional[bytes]
    version: int


@dataclass(frozen=True)
class KVDeleteResult:
    """The outcome of kv_delete: whether the key was deleted, and whether it
    existed when the delete ran, with its version then (the version
    deleted, or the one a conditional delete did not match)."""
    deleted: bool
    found: bool
    version: int


#: The protocol level from which the cluster has cursors: report_progress
#: (of consumed offsets), commit_cursor, cursors, cursor, restore_cursor,
#: delete_cursor.
CURSOR_PROTOCOL = 7

#: The protocol level from which a dataset has a seed and shuffles its
#: passes (set_dataset's ``seed`` and ``shuffle``); below it every pass is
#: in id order.
SHUFFLE_PROTOCOL = 8

#: The protocol level from which a dataset may be a weighted mixture:
#: set_dataset's ``sources``, set_weights and set_weight_schedule. A
#: cluster below it answers them Unavailable.
MIXTURE_PROTOCOL = 9

#: The most sources of a mixture (fsm.MaxSources).
MAX_SOURCES = 16
#: The largest weight of a source (fsm.MaxWeight). Weights are relative,
#: and count in millionths: 0.5, 0.3 and 0.2 mix as 5, 3 and 2 do.
MAX_WEIGHT = 4000.0
#: The most steps of a weight schedule (fsm.MaxScheduleSteps).
MAX_SCHEDULE_STEPS = 64
#: The longest name of a source (fsm.MaxSourceNameLen): 1 to 64 letters,
#: digits, "_", "-" or ".".
MAX_SOURCE_NAME = 64

#: One source of a mixture, as set_dataset's ``sources`` takes it: a
#: (name, weight, globs) triple, or a dict with the keys "name", "weight"
#: and "globs"; globs are one pattern or a list of them.
SourceArg = Union[Tuple[str, float, Union[str, Iterable[str]]], Mapping[str, Any]]

#: One step of a weight schedule, as set_weight_schedule takes it: an
#: (at_records, {name: weight}) pair, or a dict with the keys
#: "at_records" and "weights".
StepArg = Union[Tuple[int, Mapping[str, float]], Mapping[str, Any]]


@dataclass(frozen=True)
class SourceStatus:
    """One source of a mixture job (rpc.SourceStatus)."""
    name: str
    #: The source's weight now, relative to the others'.
    weight: float
    #: The source's own pass: each source cycles through its tasks at its
    #: own pace, and the job's pass is the least of its sources'.
    pass_id: int = 0
    #: The source's tasks, and how many of them are to do, out on a lease,
    #: done and failed in its pass.
    tasks: int = 0
    todo: int = 0
    pending: int = 0
    done: int = 0
    failed: int = 0
    #: The records and the tasks of the source's finished tasks, in every
    #: pass: exact, each finish counted once.
    records: int = 0
    finished: int = 0
    #: The glob patterns the source was set with.
    globs: Tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightStep:
    """A step of a weight schedule: once the job's records consumed (the
    records of its finished tasks, in every pass) reach ``at_records``,
    the sources named take these weights; the others keep theirs."""
    at_records: int
    weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Mixture:
    """A mixture job's sources, in the order they were given, and the steps
    of its weight schedule not yet reached. ``sources`` is empty for a job
    whose dataset has one source (or none)."""
    sources: Tuple[SourceStatus, ...] = ()
    schedule: Tuple[WeightStep, ...] = ()
    #: The records of every task of the job finished, in every pass: the
    #: count the schedule's steps are keyed by.
    records: int = 0

    @property
    def weights(self) -> Dict[str, float]:
        """The sources' weights now, by name."""
        return {s.name: s.weight for s in self.sources}


#: The most progress entries one report or commit carries (rpc.MaxProgress).
MAX_PROGRESS = 4096

#: The most tasks a get_tasks leases, and the most finished tasks it
#: carries (the server's bound).
MAX_TASKS_PER_GET = 32

#: One task's consumed offset, as report_progress and commit_cursor take it:
#: {"meta": {"id": ..., "epoch": ...}, "consumed": k} (the meta may be a
#: TaskMeta or a Task), or a (meta, consumed) pair.
ProgressEntry = Union[Dict[str, Any], Tuple[Union[TaskMeta, "Task", Dict[str, Any]], int]]


@dataclass(frozen=True)
class CursorInfo:
    """A cursor of a job's dispatch: the data position saved with a model
    checkpoint."""
    #: Names the cursor in its job; ids only grow.
    id: int
    #: The commit's label: the caller's training step.
    step: int
    #: The pass the job was in.
    pass_id: int
    #: The number of tasks of the dataset, of which ``finished`` were
    #: finished in the pass and ``in_flight`` more partly consumed.
    tasks: int
    finished: int
    in_flight: int
    #: The records of the pass the cursor counts as consumed: those of the
    #: finished tasks and the consumed parts of the others.
    records: int
    #: The job's restore generation at the commit: 1 before the job's
    #: first restore, and one more after each.
    generation: int
    #: What the cursor takes in the cluster's state.
    bytes: int = 0
    #: The FSM time of the commit (RFC 3339).
    created_at: str = ""


@dataclass(frozen=True)
class CursorTask:
    """A task partly consumed at a cursor: its first ``consumed`` records were."""
    task: int
    consumed: int


@dataclass(frozen=True)
class CursorDetail:
    """A cursor with its partly consumed tasks (Client.cursor)."""
    cursor: CursorInfo
    tasks: Tuple[CursorTask, ...] = ()


@dataclass(frozen=True)
class CursorList:
    """A job's cursors, oldest first, and its restore generation (Client.cursors)."""
    generation: int
    cursors: Tuple[CursorInfo, ...] = ()


@dataclass(frozen=True)
class RestoreResult:
    """What restore_cursor did: the job's dispatch is at ``cursor``'s pass,
    ``revoked`` leases were revoked, and the job's restore generation is
    now ``generation``."""
    cursor: CursorInfo
    generation: int
    revoked: int


#: How long kv_watch waits when given no timeout, in seconds.
DEFAULT_KV_WATCH_TIMEOUT = 60.0

#: The protocol level from which the cluster has the register's store
#: calls (kv_delete, kv_delete_prefix, kv_add, kv_multi_set, kv_append,
#: kv_compare_value, kv_multi_get, kv_num_keys).
KV_STORE_PROTOCOL = 5

Addrs = Union[str, Iterable[str]]


class Client:
    """A client of a raftmaster cluster. It is safe to share between threads.

    ``addrs`` are the API addresses of the cluster's nodes ("host:port",
    "http://host:port" or "https://host:port"), a list or one
    comma-separated string; any subset with a reachable node will do, as
    followers redirect to the leader. ``job`` makes every dataset, task,
    save-model, allgather and register call address that job (under
    /v1/jobs/{job}/...) instead of the default one. ``token`` is sent as
    the bearer token, only to the addresses given and to the leader one of
    them reports: a redirect to any other host is refused. ``ssl_context`` (an ``ssl.SSLContext`` that trusts
    the cluster's CA) makes "host:port" mean HTTPS and refuses plain-HTTP
    addresses and redirects; without it, "https://" addresses use the
    system's default trust. ``retry`` is how long, in seconds, a
    call keeps retrying while the cluster has no leader or cannot be
    reached (two minutes by default; 0 means a single attempt); a write
    sends no attempt later than 15 minutes after its first, whatever
    ``retry`` says, so that the cluster, which remembers its outcome for
    30 minutes, answers every retry with it.
    ``first_contact_timeout`` is how long, in seconds, a client that has
    never connected to any of its addresses keeps trying before a call
    raises NoContact, whose message names each address and what it did
    (five seconds by default; 0 waits for ``retry``). Once connected, the
    client waits through outages, a full-cluster restart included, and
    logs once (the ``raftmaster`` logger, at INFO) that it waits for a
    leader.
    ``client_indexing`` makes set_dataset expand the globs and index the
    RecordIO files here, and send the chunk list, for clusters that cannot
    see the data.

    ``session_ttl`` is the TTL of the client's session, in seconds (or a
    timedelta), from 1 s to 1 h: five seconds by default; None takes the
    cluster's default (``serve --session-ttl``); 0 or False opens no
    session. The session is opened at the client's first write, on a
    cluster at protocol level 6 (one below it has none: the client works
    without, and asks again a minute later), and a daemon thread keeps it
    alive every third of its TTL, with the progress of the tasks it holds.
    Every write but set_dataset and a mixture's weight changes is made
    under it. The tasks that get_task leases under it are held
    (``Task.session``): they need no renewal, and come back to the job at
    once when the session is closed, or after its TTL when the
    keep-alives stop (the process died or hangs). A call made under a
    session that has ended raises SessionExpired; the next call opens a
    new session. ``session_dir`` is a directory where the open session is
    recorded, as the file "<id>.session", so that a supervisor can close
    the sessions of the processes it stopped (:func:`close_recorded_sessions`;
    torchrun's agent does so with the raftmaster rendezvous): by default
    the environment's RAFTMASTER_SESSION_DIR, "" for none.

    Close it (or use it as a context manager) to close its session, stop
    its record iterators and fail the calls in flight with ClientClosed.
    """

    def __init__(self, addrs: Addrs, job: Optional[str] = None, token: Optional[str] = None, *,
                 ssl_context: Optional[ssl.SSLContext] = None, retry: Seconds = DEFAULT_RETRY,
                 client_indexing: bool = False,
                 first_contact_timeout: Seconds = DEFAULT_FIRST_CONTACT_TIMEOUT,
                 session_ttl: Union[Seconds, None, bool] = DEFAULT_SESSION_TTL,
                 session_dir: Optional[str] = None) -> None:
        if isinstance(addrs, str):
            addrs = [a for a in addrs.split(",") if a.strip()]
        bases = [normalize_addr(a, tls=ssl_context is not None) for a in addrs]
        if not bases:
            raise ValueError("raftmaster client: no address")
        if token is not None and (not token or any(c in token for c in " \t\r\n")):
            raise ValueError("raftmaster client: empty token, or one with white space")
        if job is not None and not job:
            raise ValueError("raftmaster client: empty job name")
        if job == DEFAULT_JOB:
            job = None
        retry_s = to_nanoseconds(retry) / 1e9
        if retry_s < 0:
            raise ValueError("raftmaster client: negative retry budget %r" % (retry,))
        first_contact_s = to_nanoseconds(first_contact_timeout) / 1e9
        if first_contact_s < 0:
            raise ValueError("raftmaster client: negative first-contact timeout %r" % (first_contact_timeout,))
        sessions, ttl_s = check_ttl(session_ttl)
        self.job = job
        self.client_indexing = client_indexing
        self._t = Transport(bases, token=token, job=job, ssl_context=ssl_context, retry=retry_s,
                            first_contact=first_contact_s)
        self._sessions = Sessions(self._t, ttl_s, sessions, session_dir, job or DEFAULT_JOB, self._held_progress)
        self._readers: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._shown: Dict[tuple, bool] = {}
        self._shown_lock = threading.Lock()
        self._read = _ReadJob()
        # When (time.monotonic()) the record iterators next let a get_task
        # carry a finish, after a cluster below protocol level 9 refused one.
        self._rides_off_until = 0.0

    @property
    def id(self) -> uuid.UUID:
        """The client's random id: the first part of the request ids of its
        writes made outside a session (those under session N use the
        identities of the name-based UUID of "session/N" in its namespace)."""
        return self._t.id

    @property
    def session_id(self) -> Optional[int]:
        """The id of the client's open session, or None when it has none
        (before its first write or open_session, after the session ended
        until the next call, with sessions off, or on a cluster without
        them)."""
        return self._sessions.current_id

    @property
    def addrs(self) -> List[str]:
        """The base URLs the client rotates through."""
        return self._t.ep.snapshot()

    @property
    def leader(self) -> str:
        """The base URL of the node the client believes leads, or ""."""
        return self._t.ep.leader

    def close(self) -> None:
        """Close the client's session at once, so that the tasks it holds
        come back to their jobs and the keys attached to it go, stop the
        keep-alives and the record iterators, and fail the calls in flight
        with ClientClosed. Calling it again does nothing."""
        if self._t.closed.is_set():
            return
        readers = list(self._readers)
        self._sessions.close()
        self._t.close()
        for r in readers:
            r.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _do(self, call: Call, session: bool = True) -> Any:
        """Perform call; a write goes under the client's session, unless
        session is False."""
        if call.write and call.session is None and session:
            call.session = self._sessions.get()
            if call.session is None:
                # Keys attach to a session only: without one they are plain.
                call.query.pop("attach", None)
        try:
            return self._t.do(call)
        except errors.SessionExpired as e:
            if isinstance(call.session, Session):
                self._sessions.ended(call.session, e)
            raise

    # Sessions.

    def open_session(self) -> Optional[int]:
        """Open the client's session now, rather than at its first write,
        and return its id; the session already open, if any. None when the
        client has no sessions (session_ttl 0) or the cluster has none (a
        release before them, or one not upgraded yet)."""
        s = self._sessions.get()
        return s.id if s is not None else None

    def close_session(self, session_id: int) -> bool:
        """Close session session_id, of this client or of another process
        with the same token (a supervisor closing its stopped workers'):
        the tasks it holds come back to their jobs at once, the keys
        attached to it are deleted and a save-model lease granted under it
        is released. It returns False when the session had ended already. A
        session of another token raises ForeignClient."""
        return self._close_session(session_id)

    def _close_session(self, session_id: int, budget: Optional[float] = None) -> bool:
        if isinstance(session_id, bool) or not isinstance(session_id, int) or session_id <= 0:
            raise ValueError("raftmaster client: session id %r is not a positive integer" % (session_id,))
        out = self._t.do(Call("DELETE", "/v1/sessions/%d" % session_id, write=True, budget=budget)) or {}
        if session_id == self._sessions.current_id:
            s = self._sessions._current
            if s is not None:
                self._sessions.ended(s, "closed")
        return bool(out.get("closed"))

    def sessions(self) -> List[Dict[str, Any]]:
        """The cluster's open sessions, as its leader sees them (the JSON of
        GET /v1/sessions: id, TTL, remaining time, held tasks, attached
        keys), in id order: an operator read."""
        out = self._do(Call("GET", "/v1/sessions")) or {}
        return list(out.get("sessions") or [])

    @overload
    def report_progress(self, meta: Union[TaskMeta, "Task"], records: int) -> None: ...

    @overload
    def report_progress(self, meta: Iterable[ProgressEntry]) -> int: ...

    def report_progress(self, meta: Union[TaskMeta, "Task", Iterable[ProgressEntry]],
                        records: Optional[int] = None) -> Optional[int]:
        """Report how far the training loop has consumed tasks, in one of two forms.

        ``report_progress(progress)``, with a list of entries
        ``{"meta": {"id": ..., "epoch": ...}, "consumed": k}`` (see
        ProgressEntry), records in the job, for its next cursor, that the
        first k records of each task (counting those a restored cursor
        skipped) were handed to the training loop, and returns how many
        entries named a task still leased under their meta (the others
        change nothing): each trainer reports before one of them commits
        the cursor (commit_cursor). It is a write, retried with one
        request id, of protocol level 7 (CURSOR_PROTOCOL).

        ``report_progress(task, records)`` records that records (a count)
        of the records of a task held under the client's session have been
        consumed: the next keep-alive sends it. The leader takes a held
        task back when its records have not grown for the job's task
        timeout, so a trainer that leases tasks with get_task (records()
        does this itself) reports its progress from time to time. For a
        task not held under the session it does nothing."""
        if records is None and not isinstance(meta, (TaskMeta, Task)):
            entries = _progress_body(meta)
            if not entries:
                return 0
            out = self._do(Call("POST", "/v1/task/progress", body={"progress": entries}, write=True)) or {}
            return int(out.get("recorded") or 0)
        if records is None or not isinstance(meta, (TaskMeta, Task)):
            raise TypeError("raftmaster client: report_progress takes a task and a count, or a list of progress "
                            "entries")
        sid = meta.session if isinstance(meta, Task) else self._sessions.current_id
        if isinstance(meta, Task):
            meta = meta.meta
        if sid:
            self._sessions.report(sid, self.job or DEFAULT_JOB, meta.id, meta.epoch, int(records))
        return None

    def _held_progress(self, session_id: int) -> Progress:
        """The progress of the tasks the record iterators hold under session_id."""
        out: Progress = {}
        job = self.job or DEFAULT_JOB
        for r in list(self._readers):
            p = r._held()
            if p is not None and p[0].session == session_id:
                out[(job, p[0].meta.id, p[0].meta.epoch)] = p[1]
        return out

    # Data dispatch.

    def set_dataset(self, paths: Union[str, Iterable[str], None] = None, *,
                    sources: Optional[Iterable[SourceArg]] = None, chunks_per_task: int = 0,
                    task_timeout: Optional[Seconds] = None, failure_max: Optional[int] = None,
                    strict: bool = False, seed: Optional[int] = None, shuffle: bool = True) -> DatasetResult:
        """Set the job's dataset: the RecordIO files that the glob patterns
        match. Only the first dataset counts, so every trainer may call it;
        the result says whether this one was ignored, and with which
        patterns the dataset was set: when they differ from these, the
        ``raftmaster`` logger warns, naming both. The leader expands and
        indexes the globs, unless the client was made with client_indexing.
        ``chunks_per_task`` (consecutive chunks per task), ``task_timeout``
        (the lease, seconds), ``failure_max`` (failures or timeouts a task
        survives) and ``strict`` (refuse a late task_finished of an earlier
        lease) take the server's defaults when left out.

        ``sources``, in place of ``paths``, makes the dataset a weighted
        mixture (protocol level 9, MIXTURE_PROTOCOL): a list of (name,
        weight, globs), or of dicts with those keys, such as
        ``[("web", 0.5, "/data/web/*.recordio"), ("code", 0.3,
        ["/data/code/*.recordio"])]``. A name is 1 to 64 letters, digits,
        "_", "-" or "."; weights are relative, from 0 to 4000 and not all
        0 (a source of weight 0 is not read until set_weights gives it
        one); at most 16 sources. Each task holds records of one source
        (``Task.source``), and the cluster hands out the sources' tasks so
        that the records consumed follow the weights. The leader indexes
        the sources' globs: a client made with client_indexing cannot set
        a mixture. Bad sources raise ValueError before anything is sent.

        Each pass dispatches its tasks in a permutation of (``seed``, pass),
        the same whatever the number of trainers and whatever faults
        happen; ``shuffle=False`` keeps id order. Without a ``seed`` the
        leader draws one, which the dataset records (the result's
        ``seed``). A cluster not yet upgraded to protocol level 8 keeps id
        order and records no seed: there a call with a ``seed`` raises
        Unavailable, while one without is served in id order."""
        if seed is not None and not (isinstance(seed, int) and 0 <= seed < 1 << 64):
            raise ValueError("set_dataset: seed %r: want an integer in [0, 2**64)" % (seed,))
        body: Dict[str, Any] = {}
        if sources is not None:
            if paths is not None:
                raise ValueError("raftmaster client: set_dataset: give paths or sources, not both: a mixture's "
                                 "globs are its sources'")
            if self.client_indexing:
                raise ValueError("raftmaster client: set_dataset: the leader indexes a mixture's sources, and this "
                                 "client was made with client_indexing; make one without it to set sources")
            body["sources"] = _sources_body(sources)
            globs = [g for src in body["sources"] for g in src["globs"]]
        elif paths is None:
            raise ValueError("raftmaster client: set_dataset: give paths (glob patterns) or sources")
        else:
            globs = [paths] if isinstance(paths, str) else list(paths)
            if self.client_indexing:
                remote = [g for g in globs if "://" in g and not g.startswith("file://")]
                if remote:
                    raise ValueError("raftmaster client: set_dataset: a client made with client_indexing indexes local "
                                     "files only, and %r is in an object store; make one without it so that the "
                                     "leader indexes the store" % remote[0])
                from . import recordio
                chunks = recordio.index_files(recordio.glob(globs))
                body["chunks"] = [{"path": c.path, "offset": c.offset, "records": c.records} for c in chunks]
            else:
                body["globs"] = globs
        if chunks_per_task:
            body["chunks_per_task"] = chunks_per_task
        if task_timeout is not None and to_nanoseconds(task_timeout) != 0:
            body["task_timeout"] = format_duration(task_timeout)
        if failure_max is not None:
            body["failure_max"] = failure_max
        if strict:
            body["strict"] = True
        if seed is not None:
            body["seed"] = seed
        if not shuffle:
            body["shuffle"] = False
        # Indexing a large dataset on the leader takes a while: let an
        # attempt use the whole budget.
        # A dataset is not set under a session: the cluster refuses it.
        out = self._do(Call("POST", "/v1/dataset", body=body, write=True,
                            timeout=max(self._t.retry, DEFAULT_ATTEMPT_TIMEOUT)), session=False) or {}
        result = DatasetResult(bool(out.get("ignored")), int(out.get("files", 0)), int(out.get("chunks", 0)),
                               int(out.get("tasks", 0)), tuple(out.get("current_patterns") or ()),
                               bool(out.get("shuffle")), int(out.get("seed") or 0))
        warn_other_patterns(log, self.job or DEFAULT_JOB, globs, result.ignored, result.current_patterns)
        return result

    def set_weights(self, weights: Mapping[str, float]) -> Mixture:
        """Change the weights of the job's mixture (a dataset set with
        ``sources``): ``weights`` maps source names to their new weights,
        relative, from 0 to 4000; the sources not named keep theirs. The
        change takes effect at one log index for every trainer, from the
        next task handed out: the records counted since the weights last
        changed start again from 0, so the new weights hold from then on
        and the past is not paid back. At least one source must keep a
        weight above 0. It returns the mixture after the change. Bad input
        raises ValueError before anything is sent; a name the job has no
        source of raises Invalid, and so does a job whose dataset has one
        source. Retried with one request id, it is applied once."""
        return self._set_weights({"weights": _weights_body("set_weights", weights)})

    def set_weight_schedule(self, steps: Iterable[StepArg]) -> Mixture:
        """Replace the weight schedule of the job's mixture: steps of
        (at_records, {name: weight}), in increasing at_records (at most
        64). Once the job's records consumed (the records of its finished
        tasks, in every pass; ``Mixture.records``) reach a step's
        at_records, its sources take its weights, as set_weights would
        give them, at the task finish that reaches it. A step already
        reached takes effect at once. An empty list clears the schedule.
        It returns the mixture after the change, whose ``schedule`` holds
        the steps not yet reached."""
        body: Dict[str, Any] = {"replace_schedule": True}
        schedule = _schedule_body(steps)
        if schedule:
            body["schedule"] = schedule
        return self._set_weights(body)

    def _set_weights(self, body: Dict[str, Any]) -> Mixture:
        # An operator's change, not a trainer's: it is made outside the
        # client's session, so that it opens none.
        out = self._do(Call("POST", "/v1/weights", body=body, write=True), session=False) or {}
        return _mixture(out)

    def mixture(self) -> Mixture:
        """The job's mixture as the leader has it (from GET
        /v1/jobs/{job}, an operator read): its sources, with their weights,
        passes and exact record counts, the schedule's steps not yet
        reached and the records of every finished task. Its ``sources`` are
        empty when the job's dataset has one source, or none."""
        out = self._do(Call("GET", "/v1/jobs/" + _quote(self.job or DEFAULT_JOB))) or {}
        return _mixture(out)

    def get_tasks(self, pass_id: int, n: int, finished: Sequence[Union[TaskMeta, Task]] = ()
                  ) -> Tuple[List[Task], List[Optional[errors.FinishOutcome]]]:
        """get_task for a reader that prefetches: one write finishes every
        task of ``finished`` (at most MAX_TASKS_PER_GET, in order, each as
        task_finished would) and leases up to ``n`` tasks of the pass (1 to
        MAX_TASKS_PER_GET), fewer when fewer are left, so that n tasks
        cost one write (protocol level 10). It returns the tasks and how
        each finish went, in the order of ``finished``: a FinishOutcome, or
        None where the answer did not say (report that task with
        task_finished). When the lease part fails it raises as get_task
        does, and the error's ``finish`` and ``more_finish`` (padded with
        None) say how the finishes went. Tasks leased under the
        client's session are held by it; without one, renew each while it
        is read. A cluster below protocol level 10 raises UpgradePending at
        once, nothing finished nor leased."""
        if not 1 <= n <= MAX_TASKS_PER_GET or len(finished) > MAX_TASKS_PER_GET:
            raise ValueError("get_tasks of %d tasks and %d finishes: each must be at most %d, and the tasks at least 1"
                             % (n, len(finished), MAX_TASKS_PER_GET))
        metas = [f.meta if isinstance(f, Task) else f for f in finished]
        body: Dict[str, Any] = {"pass": pass_id}
        if n > 1:
            body["count"] = n
        if metas:
            body["finished"] = {"id": metas[0].id, "epoch": metas[0].epoch}
        if len(metas) > 1:
            body["more_finished"] = [{"id": m.id, "epoch": m.epoch} for m in metas[1:]]
        number = self._read.number
        if number:
            body["job_number"] = number
        sid = self._sessions.current_id
        if sid:
            for m in metas:
                self._sessions.forget(sid, self.job or DEFAULT_JOB, m.id, m.epoch)
        final = batch_unsupported if metas or n > 1 else None
        try:
            out = self._do(Call("POST", "/v1/task/get", body=body, write=True, final=final)) or {}
        except errors.RaftmasterError as e:
            if (metas or n > 1) and batch_unsupported(e):
                err = errors.UpgradePending(e.message, status=e.status)
                err.context = "raftmaster client: get_tasks of a batch"
                raise err from e
            e.more_finish = _padded(e.more_finish, len(metas) - 1)
            if self._read.answered(0, e):
                gone = self._job_gone()
                gone.finish, gone.more_finish = e.finish, e.more_finish
                raise gone from e
            raise
        tasks = [_task(out)] + [_task({"task": t, "applied_at": out.get("applied_at")}) for t in out.get("more") or []]
        outcomes: List[Optional[errors.FinishOutcome]] = []
        if metas:
            outcomes.append(errors.finish_from_wire(out.get("finish")))
            more = [errors.finish_from_wire(o) for o in out.get("more_finish") or []]
            outcomes.extend(_padded(more, len(metas) - 1))
        if self._read.answered(int(out.get("job_number") or 0), None):
            for t in tasks:
                try:
                    self._report("/v1/task/failed", t.meta, budget=5.0)
                except errors.RaftmasterError as e:
                    log.debug("cannot hand back a task of a job created again: %s", e)
            raise self._job_gone()
        return tasks, outcomes

    def get_task(self, pass_id: int, finished: Union[TaskMeta, Task, None] = None) -> Task:
        """Lease the next task of pass pass_id. It raises PassBefore or
        PassAfter for another pass, NoMoreAvailable when the rest of the pass
        is leased to others, AllTaskFailed, or NoDataset while the job has
        none yet. Once the client has seen the job with a dataset, it raises
        UnknownJob when that job has been deleted, even if a job of the same
        name was created since: make a new client to read that one.

        With ``finished``, the task the caller has just finished, one write
        finishes it, exactly as task_finished would, and leases the next
        task (protocol level 9), so that reading costs one write per task.
        The task's ``finish`` (a FinishOutcome) says how the finish went;
        when the lease part fails, the error's ``finish`` does: the finish
        of a pass's last task counts, and the answer is PassBefore, since
        that finish ended the pass. A retry is answered as the first
        attempt was, the finish's outcome included. An error whose
        ``finish`` is None did not say: report the task with task_finished,
        which does no harm if the finish had counted. A cluster below
        protocol level 9 (or a node of an earlier release) takes no
        finish with the lease: get_task then raises UpgradePending at
        once, nothing finished nor leased; report the task with
        task_finished and ask without it, as records() does."""
        body: Dict[str, Any] = {"pass": pass_id}
        number = self._read.number
        if number:
            # The cluster answers unknown_job once this job is gone.
            body["job_number"] = number
        final = None
        if finished is not None:
            meta = finished.meta if isinstance(finished, Task) else finished
            body["finished"] = {"id": meta.id, "epoch": meta.epoch}
            sid = self._sessions.current_id
            if sid:
                self._sessions.forget(sid, self.job or DEFAULT_JOB, meta.id, meta.epoch)
            # Retrying would not raise the cluster's level.
            final = finish_unsupported
        try:
            out = self._do(Call("POST", "/v1/task/get", body=body, write=True, final=final)) or {}
        except errors.RaftmasterError as e:
            if finished is not None and finish_unsupported(e):
                err = errors.UpgradePending(e.message, status=e.status)
                err.context = "raftmaster client: get_task carrying a finished task"
                raise err from e
            if self._read.answered(0, e):
                gone = self._job_gone()
                gone.finish = e.finish
                raise gone from e
            raise
        task = _task(out)
        if self._read.answered(int(out.get("job_number") or 0), None):
            # A task of the job created again under the name, from a
            # cluster below protocol level 2, which does not check the
            # number: hand it back at once rather than hold it for its
            # whole lease.
            try:
                self._report("/v1/task/failed", task.meta, budget=5.0)
            except errors.RaftmasterError as e:
                log.debug("cannot hand back a task of a job created again: %s", e)
            raise self._job_gone()
        return task

    def _job_gone(self) -> errors.UnknownJob:
        return errors.UnknownJob("job %r, which this client read, was deleted" % (self.job or DEFAULT_JOB))

    def task_finished(self, meta: Union[TaskMeta, Task]) -> None:
        """Report the task done. A late report from an earlier lease is
        accepted, unless the dataset is strict."""
        self._report("/v1/task/finished", meta)

    def task_failed(self, meta: Union[TaskMeta, Task]) -> None:
        """Report the task failed under its lease: it is dispatched again, or
        set aside after failure_max failures. A stale epoch is ignored."""
        self._report("/v1/task/failed", meta)

    def renew_lease(self, meta: Union[TaskMeta, Task]) -> float:
        """Extend the lease of a task still being worked on by the dataset's
        task timeout, and return how long the renewed lease lasts from the
        answer, in seconds (renew again well before): what remains of it
        when the renewal was retried after the cluster had applied it. It
        raises StaleEpoch when the lease is no longer this one."""
        return self._report("/v1/task/renew", meta)

    def renew_leases(self, metas: Sequence[Union[TaskMeta, Task]]
                     ) -> List[Tuple[float, Optional[errors.RaftmasterError]]]:
        """renew_lease of several leases in one write (protocol level 10),
        for a reader that holds a batch without a session. It returns, per
        lease in order, how long the renewed lease lasts in seconds and
        None, or 0 and the error renew_lease of it alone would have raised
        (StaleEpoch, UnknownTask): one that could not be renewed does not
        fail the others. Below level 10 it raises UpgradePending at once,
        nothing renewed."""
        ms = [m.meta if isinstance(m, Task) else m for m in metas]
        if not 1 <= len(ms) <= MAX_TASKS_PER_GET:
            raise ValueError("renew_leases of %d leases: 1 to %d" % (len(ms), MAX_TASKS_PER_GET))
        body: Dict[str, Any] = {"meta": {"id": ms[0].id, "epoch": ms[0].epoch}}
        if len(ms) > 1:
            body["more"] = [{"id": m.id, "epoch": m.epoch} for m in ms[1:]]
        try:
            out = self._do(Call("POST", "/v1/task/renew", body=body, write=True,
                                final=batch_unsupported if len(ms) > 1 else None)) or {}
        except errors.RaftmasterError as e:
            if len(ms) > 1 and batch_unsupported(e):
                err = errors.UpgradePending(e.message, status=e.status)
                err.context = "raftmaster client: renew_leases of several leases"
                raise err from e
            if len(ms) == 1 and isinstance(e, (errors.StaleEpoch, errors.UnknownTask)):
                return [(0.0, e)]
            if isinstance(e, errors.NoDataset) and self._read.reported(e):
                raise self._job_gone() from e
            raise
        if len(ms) == 1:
            return [(parse_duration(out["lease"]) if out.get("lease") else 0.0, None)]
        renewed = out.get("renewed") or []
        if len(renewed) != len(ms):
            raise errors.RaftmasterError("raftmaster client: renew_leases of %d leases answered %d outcomes"
                                         % (len(ms), len(renewed)))
        result: List[Tuple[float, Optional[errors.RaftmasterError]]] = []
        for o in renewed:
            code = o.get("code")
            if code:
                result.append((0.0, errors.from_wire(code, "the lease was not renewed")))
            else:
                result.append((parse_duration(o["lease"]) if o.get("lease") else 0.0, None))
        return result

    def _report(self, path: str, meta: Union[TaskMeta, Task], budget: Optional[float] = None,
                cancel: Optional[threading.Event] = None) -> float:
        """Send a task report; return the renewed lease in seconds, which
        the answer to a renewal gives (0 otherwise)."""
        if isinstance(meta, Task):
            meta = meta.meta
        if path != "/v1/task/renew":
            sid = self._sessions.current_id
            if sid:
                self._sessions.forget(sid, self.job or DEFAULT_JOB, meta.id, meta.epoch)
        try:
            out = self._do(Call("POST", path, body={"meta": {"id": meta.id, "epoch": meta.epoch}}, write=True,
                                budget=budget, cancel=cancel)) or {}
        except errors.NoDataset as e:
            if self._read.reported(e):
                raise self._job_gone() from e
            raise
        if out.get("ignored"):
            log.debug("task report ignored: %s task %d epoch %d", path, meta.id, meta.epoch)
        return parse_duration(out["lease"]) if out.get("lease") else 0.0

    def request_save_model(self, trainer_id: str, block: Seconds) -> bool:
        """Ask whether trainer_id may save the model now. The lease is
        granted to one trainer at a time, for ``block`` (seconds or a
        timedelta); the holder may ask again to extend it.
        request_save_model_lease also says how long the grant lasts."""
        return self.request_save_model_lease(trainer_id, block).granted

    def request_save_model_lease(self, trainer_id: str, block: Seconds) -> SaveModelGrant:
        """request_save_model that also says how long the lease lasts from
        the answer: save within it, or ask again to extend it."""
        out = self._do(Call("POST", "/v1/savemodel", write=True,
                            body={"trainer_id": trainer_id, "block_dur": format_duration(block)})) or {}
        granted = bool(out.get("granted"))
        lease = out.get("lease")
        return SaveModelGrant(granted, parse_duration(lease) if granted and isinstance(lease, str) and lease else 0.0)

    # Cursors: the data position saved with the model (protocol level 7,
    # CURSOR_PROTOCOL; a cluster below it answers Unavailable, retried for
    # the client's retry budget, or Invalid).

    def commit_cursor(self, step: int, progress: Optional[Iterable[ProgressEntry]] = None,
                      trainer_id: Optional[str] = None, generation: Optional[int] = None) -> CursorInfo:
        """Commit a cursor of the job's dispatch as it is now, to save with
        the model checkpoint of training step ``step`` (a label kept with
        the cursor): the pass, the tasks finished in it, and the consumed
        offset of each task in flight, from ``progress`` (entries as
        report_progress takes them, recorded first) and from what trainers
        reported before. A task whose consumed offset is its record count
        counts as finished. With ``trainer_id`` the commit is refused
        (CursorFenced) while another trainer holds the save-model lease;
        with ``generation`` (not 0) it is refused once the job was restored
        after that generation (CursorList.generation,
        RestoreResult.generation). Retried with one request id, it commits
        one cursor."""
        _check_int("commit_cursor", "step", step, negative=True)
        body: Dict[str, Any] = {"step": step}
        if progress is not None:
            entries = _progress_body(progress)
            if entries:
                body["progress"] = entries
        if trainer_id:
            body["trainer_id"] = trainer_id
        if generation:
            _check_int("commit_cursor", "generation", generation)
            body["generation"] = generation
        out = self._do(Call("POST", "/v1/cursors", body=body, write=True)) or {}
        return _cursor_info(out.get("cursor") or {})

    def cursors(self) -> CursorList:
        """The job's cursors, oldest first, and its restore generation: 1,
        plus one for each restore_cursor it has seen. A read, at the leader
        after a read barrier."""
        out = self._do(Call("GET", "/v1/cursors")) or {}
        return CursorList(int(out.get("generation") or 0),
                          tuple(_cursor_info(c) for c in out.get("cursors") or []))

    def cursor(self, cursor_id: int) -> CursorDetail:
        """Cursor cursor_id of the job, with its partly consumed tasks;
        UnknownCursor when the job has none of that id."""
        _check_int("cursor", "cursor id", cursor_id)
        out = self._do(Call("GET", "/v1/cursors/%d" % cursor_id)) or {}
        tasks = tuple(CursorTask(int(t.get("task") or 0), int(t.get("consumed") or 0)) for t in out.get("tasks") or [])
        return CursorDetail(_cursor_info(out.get("cursor") or {}), tasks)

    def restore_cursor(self, cursor_id: int) -> RestoreResult:
        """Put the job's dispatch back to cursor cursor_id: the job goes to
        the cursor's pass, the tasks finished at the cursor stay finished,
        those partly consumed are dispatched again with Task.skip set to
        their consumed offset (the reader delivers only the rest), and the
        others are to do. Every lease of the job is revoked: the holders'
        reports no longer count, so stop every trainer of the job before,
        and start reading only after. The job's restore generation goes up
        by one. UnknownCursor when the job has no such cursor."""
        _check_int("restore_cursor", "cursor id", cursor_id)
        out = self._do(Call("POST", "/v1/cursors/%d/restore" % cursor_id, body={}, write=True)) or {}
        return RestoreResult(_cursor_info(out.get("cursor") or {}), int(out.get("generation") or 0),
                             int(out.get("revoked") or 0))

    def delete_cursor(self, cursor_id: int) -> bool:
        """Delete cursor cursor_id of the job; return whether it existed."""
        _check_int("delete_cursor", "cursor id", cursor_id)
        out = self._do(Call("DELETE", "/v1/cursors/%d" % cursor_id, write=True)) or {}
        return bool(out.get("deleted"))

    def records(self, pass_id: int, *, skip_damaged: bool = False, finish: bool = True,
                shuffle_buffer: int = 0) -> "PassRecords":
        """Iterate over this trainer's share of the records of pass pass_id.

        The iterator leases one task at a time, renews its lease in the
        background while the task's records are consumed (a task held by
        the client's session needs no renewal: the session's keep-alives
        carry how many of its records were taken), reads and verifies
        all of a task's chunks before it yields any record, and reports the
        task finished when the record after its last one is asked for, with
        the get_task that leases the next task (``finished``: one write per
        task; on its own while the cluster is below protocol level 9), or
        at close, once its last record was taken: a record counts as
        consumed once it is yielded, and the iterator's ``progress()``
        gives the consumed offset of the task it reads, for
        commit_cursor. A task dispatched again by a restored cursor
        (Task.skip) yields only the records the cursor did not count as
        trained. With ``finish`` False no task is reported finished: the
        caller reports each once it has consumed its last record (see
        PassRecords). It waits while the pass
        has not started, there is no dataset yet, or the cluster cannot be
        reached; it ends (StopIteration) when the pass has nothing left for
        this trainer: PassBefore (the pass is over) or NoMoreAvailable (the
        rest is leased to others), which ``end`` then holds. AllTaskFailed,
        UnknownJob once the job it read was deleted (see get_task), and
        answers that asking again would not change, are raised.

        A task whose data cannot be read is reported failed and raises a
        ChunkError (none of its records are yielded); the next ``next()``
        goes on with the next records. Damaged data of the same task is
        shown once per pass. With ``skip_damaged`` such tasks are logged and
        skipped instead. Close the iterator (or use it as a context manager)
        to hand back a task it is in the middle of.

        With ``shuffle_buffer`` n > 0 the records of each task are
        shuffled through a buffer of n records (as tf.data's shuffle: n
        at least the task's record count shuffles it whole), by a
        ``random.Random`` seeded from the job's seed (Task.seed), the
        task's pass and its id: every reader of a task, at any number of
        trainers and after a restored cursor, yields it in the same order,
        and the consumed offsets count records in that order. Every reader
        of a job must then use the same ``shuffle_buffer``.
        """
        from .records import PassRecords
        if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or shuffle_buffer < 0:
            raise ValueError("records: shuffle_buffer %r: want an integer >= 0" % (shuffle_buffer,))
        r = PassRecords(self, pass_id, skip_damaged=skip_damaged, finish=finish, shuffle_buffer=shuffle_buffer)
        self._readers.add(r)
        return r

    def _first_shown(self, task_id: int, pass_id: int) -> bool:
        """Record that damaged task task_id of pass_id was shown; report whether it is new."""
        with self._shown_lock:
            for k in [k for k in self._shown if k[1] < pass_id]:
                del self._shown[k]
            if (task_id, pass_id) in self._shown:
                return False
            self._shown[(task_id, pass_id)] = True
            return True

    # Allgather.

    def join(self, group: str, member: Union[uuid.UUID, str], num_peers: int, data: Any,
             timeout: Optional[Seconds] = None, *, deadline: bool = False,
             on_timeout: Optional[Callable[[errors.AllGatherTimeoutExceeded], None]] = None) -> AllgatherResult:
        """Join the allgather group of num_peers members with data (any JSON
        value) and wait for every member's data: it returns the data in join
        order and this member's rank.

        ``timeout`` (seconds; ten minutes when None) is when the members are
        told the group is late: ``on_timeout`` is called once with
        AllGatherTimeoutExceeded, and the group stays open, as in the original.
        With ``deadline`` it is a hard deadline instead: for every member,
        ``on_timeout`` is called and the join raises
        AllGatherTimeoutExceeded, even when other members start the group
        afresh before this one hears of it (the answer is kept for the
        timeout or five minutes, the longer). Only the join that creates
        the group sets either. A later join with the same member id makes
        this one raise Reconnected, and a leave makes it raise Closed.
        """
        member_id = _member(member)
        body: Dict[str, Any] = {"group": group, "member": str(member_id), "num_peers": num_peers, "data": data}
        group_timeout = DEFAULT_TIMEOUT
        if timeout is not None and to_nanoseconds(timeout) != 0:
            body["timeout"] = format_duration(timeout)
            group_timeout = to_nanoseconds(timeout) / 1e9
        if deadline:
            body["fail_on_timeout"] = True
        try:
            json.dumps(data)
        except (TypeError, ValueError) as e:
            raise errors.Invalid("allgather data: %s" % e) from e
        out = self._do(Call("POST", "/v1/allgather/join", body=body, write=True)) or {}
        generation = int(out.get("generation", 0))
        return self._watch(group, member_id, generation, group_timeout, on_timeout)

    def _watch(self, group: str, member: uuid.UUID, generation: int, group_timeout: float,
               on_timeout: Optional[Callable[[errors.AllGatherTimeoutExceeded], None]]) -> AllgatherResult:
        query = {"group": group, "member": str(member), "generation": str(generation),
                 "wait": format_duration(_WATCH_WAIT)}
        told = False
        while True:
            try:
                out = self._do(Call("GET", "/v1/allgather/watch", query=dict(query),
                                    timeout=_WATCH_WAIT + _WATCH_SLACK,
                                    budget=max(self._t.retry, group_timeout))) or {}
            except errors.AllGatherTimeoutExceeded as e:
                if on_timeout is not None and not told:
                    on_timeout(e)
                raise
            status = out.get("status")
            if status == "pending":
                if out.get("overdue") and "seen_overdue" not in query:
                    query["seen_overdue"] = "true"
                    if on_timeout is not None:
                        told = True
                        on_timeout(errors.AllGatherTimeoutExceeded("allgather timeout exceeded"))
                continue
            if status == "complete":
                return AllgatherResult(list(out.get("data") or []), int(out.get("rank", 0)))
            raise errors.RaftmasterError("raftmaster client: unknown allgather watch status %r" % (status,))

    def leave(self, group: str, member: Union[uuid.UUID, str]) -> None:
        """Remove member from the group: its pending join raises Closed.
        When the last member leaves, the group closes."""
        self._do(Call("POST", "/v1/allgather/leave", write=True,
                      body={"group": group, "member": str(_member(member))}))

    # The job's register.

    def kv_get(self, key: str) -> KVValue:
        """Read key of the job's register. The read is linearizable: the
        leader answers after a read barrier, so it reflects every kv_cas
        acknowledged before the call. A key is 1 to 256 bytes of printable
        ASCII without spaces; another raises Invalid."""
        out = self._do(Call("GET", "/v1/kv/get", query={"key": key})) or {}
        return _kv_value(out)

    def kv_cas(self, key: str, version: int, value: bytes, *, attach: bool = False) -> KVResult:
        """Store value under key of the job's register if the key is at
        version, 0 meaning that the key must not exist. Otherwise nothing
        changes, and the result carries the key's current value and version,
        to decide from and try again with. The call is retried with one
        request id, so it is applied at most once; a retry of one that did
        not swap reports the key as it is then. A value over the cluster's
        limit (1 MiB unless configured), or a new key past the job's key
        limit, raises LimitExceeded. ``attach``: see kv_multi_set."""
        _check_version("kv_cas", version)
        body = {"key": key, "version": version, "value": _b64("kv_cas", value)}
        out = self._do(Call("POST", "/v1/kv/cas", body=body, write=True, query=_attach(attach))) or {}
        v = _kv_value(out)
        return KVResult(bool(out.get("swapped")), v.found, v.value, v.version)

    def kv_watch(self, key: str, after: int = 0, timeout: Seconds = DEFAULT_KV_WATCH_TIMEOUT) -> KVWatchResult:
        """Wait until key of the job's register differs from version after
        and return what it then holds: with after 0, until the key exists;
        with a version, until the key is written again or deleted (found
        False). When ``timeout`` (seconds, or a timedelta) passes first, it
        returns the key as it is, timed_out set; 0 looks once. The wait is a
        long poll, not a loop of reads: the leader answers as soon as the
        key changes, after a read barrier, so the answer is linearizable, as
        kv_get's. It asks again every 30 seconds, or sooner when the
        server's limit is lower, and rides out a change of leader within
        its timeout. A server of an earlier release, which has no watch,
        raises NotFound."""
        _check_version("kv_watch", after)
        deadline = time.monotonic() + max(to_nanoseconds(timeout) / 1e9, 0.0)
        query = {"key": key, "after": str(after)}
        while True:
            left = max(deadline - time.monotonic(), 0.0)
            poll = min(left, _WATCH_WAIT)
            # Whole milliseconds, rounded up: a wait cut to 0 would spin.
            query["wait"] = "%dms" % math.ceil(poll * 1000)
            out = self._do(Call("GET", "/v1/kv/watch", query=dict(query), timeout=poll + _WATCH_SLACK,
                                budget=max(self._t.retry, left))) or {}
            v = _kv_value(out)
            res = KVWatchResult(v.found, v.value, v.version, bool(out.get("timed_out")))
            if not res.timed_out or deadline - time.monotonic() <= 0:
                return res

    # The register's store calls, of protocol level 5 (KV_STORE_PROTOCOL):
    # a cluster below it answers Unavailable, which is retried for the
    # client's retry budget; protocol() tells whether the cluster has them.

    def kv_delete(self, key: str, version: int = 0) -> KVDeleteResult:
        """Delete key of the job's register; with a version other than 0,
        only while the key is at that version. A key deleted and created
        again takes a new version, so a kv_cas fenced by the deleted value's
        version swaps nothing. Retried with one request id, it is applied at
        most once: a retry answers the first outcome."""
        _check_version("kv_delete", version)
        body: Dict[str, Any] = {"key": key}
        if version:
            body["version"] = version
        out = self._do(Call("POST", "/v1/kv/delete", body=body, write=True)) or {}
        return KVDeleteResult(bool(out.get("deleted")), bool(out.get("found")), int(out.get("version") or 0))

    def kv_delete_prefix(self, prefix: str) -> int:
        """Delete every key of the job's register that starts with prefix,
        in one log entry, and return how many were deleted. A prefix
        follows the rule of keys."""
        out = self._do(Call("POST", "/v1/kv/delete-prefix", body={"prefix": prefix}, write=True)) or {}
        return int(out.get("deleted") or 0)

    def kv_add(self, key: str, amount: int, *, attach: bool = False) -> int:
        """Add amount to the integer key holds in decimal ASCII (0 when it
        does not exist) and return the sum, as torch's Store.add. A value
        that is not a decimal integer, or a sum past 64 bits, raises
        Invalid and changes nothing. A retry answers the sum its first
        attempt made. ``attach``: see kv_multi_set."""
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError("raftmaster client: kv_add: amount %r is not an integer" % (amount,))
        out = self._do(Call("POST", "/v1/kv/add", body={"key": key, "amount": amount}, write=True,
                            query=_attach(attach))) or {}
        return int(out.get("value") or 0)

    def kv_multi_set(self, pairs: Union[Dict[str, bytes], Iterable[Tuple[str, bytes]]], *,
                     attach: bool = False) -> List[int]:
        """Store each value under its key in one log entry, all of them or,
        past a limit, none (LimitExceeded), and return the version each key
        was given, in order. The keys are distinct; the values together are
        at most the cluster's value limit.

        With ``attach`` the keys stored are attached to the client's
        session, which deletes them in the entry that ends it (closed, or
        expired after its TTL without keep-alives): keys that should vanish
        with the process that wrote them. Without a session (sessions off,
        or a cluster below protocol level 6) they are stored as plain
        keys."""
        items = list(pairs.items()) if isinstance(pairs, dict) else list(pairs)
        body = {"pairs": [{"key": k, "value": _b64("kv_multi_set", v)} for k, v in items]}
        out = self._do(Call("POST", "/v1/kv/multi-set", body=body, write=True, query=_attach(attach))) or {}
        return [int(v) for v in out.get("versions") or []]

    def kv_append(self, key: str, value: bytes, *, attach: bool = False) -> int:
        """Append value to key's value, creating the key, and return the
        value's new length; the value stays within the cluster's value
        limit (LimitExceeded). A retry appends nothing more. ``attach``:
        see kv_multi_set."""
        out = self._do(Call("POST", "/v1/kv/append", body={"key": key, "value": _b64("kv_append", value)},
                            write=True, query=_attach(attach))) or {}
        return int(out.get("length") or 0)

    def kv_compare_value(self, key: str, expected: bytes, desired: bytes, *, attach: bool = False) -> KVResult:
        """Store desired under key if the key holds expected, or if it does
        not exist and expected is empty: torch's compare_set, by value. The
        result carries the key afterwards (compare_set returns its value
        when found, else expected). A retry that swapped answers the same;
        one that did not reports the key as it is then. ``attach``: see
        kv_multi_set."""
        body = {"key": key, "expected": _b64("kv_compare_value", expected),
                "desired": _b64("kv_compare_value", desired)}
        out = self._do(Call("POST", "/v1/kv/compare-set", body=body, write=True, query=_attach(attach))) or {}
        v = _kv_value(out)
        return KVResult(bool(out.get("swapped")), v.found, v.value, v.version)

    def kv_multi_get(self, keys: Iterable[str]) -> List[KVValue]:
        """Read keys of the job's register, all at one point of the log, and
        return what each holds, in order. The read is linearizable, as
        kv_get's; it is no log entry."""
        names = list(keys)
        out = self._do(Call("POST", "/v1/kv/multi-get", body={"keys": names})) or {}
        values = [_kv_value(v) for v in out.get("values") or []]
        if len(values) != len(names):
            raise errors.RaftmasterError("raftmaster client: a multi-get of %d keys answered %d values"
                                         % (len(names), len(values)))
        return values

    def kv_num_keys(self, prefix: str = "") -> int:
        """Count the keys of the job's register that start with prefix, or
        all of them. The read is linearizable, as kv_get's."""
        out = self._do(Call("GET", "/v1/kv/num-keys", query={"prefix": prefix} if prefix else None)) or {}
        return int(out.get("count") or 0)

    # Cluster.

    def protocol(self) -> int:
        """The cluster's protocol level, as the leader has applied it (0
        from a release before protocol levels). It only rises, once every
        node runs a release that knows the next level."""
        st = self._do(Call("GET", "/v1/status")) or {}
        return int(st.get("cluster_protocol") or 0)

    def status(self, stale: bool = False) -> Dict[str, Any]:
        """Describe the leader and the state (the JSON of /v1/status). The
        read is linearizable; with ``stale`` whichever node answers describes
        itself from its local state, which may lag behind. For a client of
        a named job, ``status()["fsm"]`` summarises that job (its dataset,
        pass, tasks, groups and save-model lease, and for a mixture its
        "sources", "schedule" and "records", from /v1/jobs/{job}; empty
        while the job does not exist yet; left out under a trainer token,
        which may not read it) beside the cluster's figures, and
        ``status()["fsm"]["job"]`` names it."""
        q = {"stale": "true"} if stale else None
        st = self._do(Call("GET", "/v1/status", query=q)) or {}
        if self.job is None:
            return st
        info: Optional[Dict[str, Any]]
        try:
            info = self._do(Call("GET", "/v1/jobs/" + _quote(self.job), query=q)) or {}
        except errors.UnknownJob:
            info = {}
        except errors.Forbidden:
            info = None  # a trainer token: the job's summary is an operator read
        fsm = dict(st.get("fsm") or {})
        for k in _DEFAULT_JOB_ONLY + tuple(_JOB_FIELDS):
            fsm.pop(k, None)
        if info is not None:
            for k, default in _JOB_FIELDS.items():
                fsm[k] = info[k] if k in info else (list(default) if isinstance(default, list) else default)
        fsm["job"] = self.job
        st["fsm"] = fsm
        return st

    def call(self, path: str, body: Any) -> Any:
        """Send a write to path (such as "/v1/task/get") with body as JSON and
        return the decoded answer, with redirects and retries like every
        other call: for fields the typed calls do not return."""
        return self._do(Call("POST", path, body=body, write=True), session=path not in _NO_SESSION)

    def create_job(self, name: str) -> bool:
        """Create the job named name, empty (an operator call). It returns
        False when the job existed already, which changes nothing."""
        out = self._do(Call("POST", "/v1/jobs/%s/create" % _quote(name), body={}, write=True)) or {}
        return not out.get("ignored")

    def delete_job(self, name: str) -> None:
        """Delete the job named name with everything it holds (an operator
        call); UnknownJob when there is no such job."""
        self._do(Call("POST", "/v1/jobs/%s/delete" % _quote(name), body={}, write=True))


def close_recorded_sessions(client: Client, directory: str) -> List[int]:
    """Close the sessions recorded in directory (a client's
    ``session_dir``, RAFTMASTER_SESSION_DIR) with client, and remove their
    files: for a supervisor that stopped the processes that opened them, so
    that their tasks come back at once rather than after the sessions' TTL.
    It returns the ids of those that were still open. A session it cannot
    close (another token's, or the cluster does not answer within a few
    seconds, and then it tries no other) is logged, and ends after its
    TTL."""
    closed: List[int] = []
    reached = True
    for sid in recorded_sessions(directory):
        try:
            if reached and client._close_session(sid, budget=min(client._t.retry, CLOSE_BUDGET)):
                closed.append(sid)
        except errors.ClientClosed:
            raise
        except errors.RaftmasterError as e:
            log.warning("cannot close session %d (it ends after its TTL): %s", sid, e)
            reached = bool(e.code) and not e.retryable
        try:
            os.remove(os.path.join(directory, "%d%s" % (sid, SESSION_FILE_SUFFIX)))
        except OSError:
            pass
    return closed


class _ReadJob:
    """What a client learnt of its job from the answers to get_task: whether
    the job had a dataset, and its number. get_task names the number once
    it is known, and the cluster then answers unknown_job when the job is
    gone. Besides, a job's dataset goes only with the job, and a job created
    again under its name has another number, so NoDataset once a dataset
    was seen, or a task of another number (from a cluster that does not
    check it yet), also means that the job the client read was deleted. A
    client that never saw a dataset waits for one, as for a job not created
    yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.dataset = False
        self.number = 0
        self.gone = False

    def answered(self, number: int, e: Optional[errors.RaftmasterError]) -> bool:
        """Record what an answer to get_task (the job's number, or the error)
        says; return whether the job the client read is gone."""
        with self._lock:
            if isinstance(e, errors.UnknownJob):
                self.gone = self.gone or self.number != 0
            elif e is None:
                self.dataset = True
                if number and self.number and number != self.number:
                    self.gone = True
                elif number:
                    self.number = number
            elif isinstance(e, errors.NoDataset):
                self.gone = self.gone or self.dataset
            elif isinstance(e, (errors.PassBefore, errors.PassAfter, errors.NoMoreAvailable, errors.AllTaskFailed,
                                errors.StaleEpoch)):
                # Answers of a job with a dataset (a stale epoch replays a task).
                self.dataset = True
            else:
                return False  # no answer of the job's, such as a cluster that cannot be reached
            return self.gone

    def reported(self, e: errors.RaftmasterError) -> bool:
        """Whether the answer to a task report, e, shows that the job read is gone."""
        with self._lock:
            if isinstance(e, errors.NoDataset) and self.dataset:
                self.gone = True
            return self.gone


#: The fields of a job's summary in status()["fsm"] (rpc.Job), with their
#: values for a job that does not exist yet.
_JOB_FIELDS: Dict[str, Any] = {"has_dataset": False, "pass": 0, "tasks": 0, "todo": 0, "pending": 0, "done": 0,
                               "failed": 0, "uploads": 0, "groups": 0, "save_holder": "", "save_deadline": None,
                               "sources": [], "schedule": [], "records": 0}
#: The writes that the client makes outside its session: the dataset, which
#: the cluster refuses under one, and a mixture's weights, an operator's.
_NO_SESSION = frozenset({"/v1/dataset", "/v1/weights"})
#: The fields of /v1/status's summary that describe the default job only.
_DEFAULT_JOB_ONLY = ("chunks", "params")


def _quote(name: str) -> str:
    from urllib.parse import quote
    return quote(name, safe="")


def _member(member: Union[uuid.UUID, str]) -> uuid.UUID:
    if isinstance(member, uuid.UUID):
        return member
    try:
        return uuid.UUID(str(member))
    except ValueError:
        raise errors.Invalid("member %r is not a UUID" % (member,)) from None


def _attach(attach: bool) -> Optional[Dict[str, str]]:
    """The query of a register write that attaches its keys to the session."""
    return {"attach": "true"} if attach else None


def _check_version(call: str, version: int) -> None:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError("raftmaster client: %s: version %r is not a non-negative integer" % (call, version))


def _b64(call: str, value: bytes) -> str:
    """A register value in its wire form, base64; TypeError for anything but bytes."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError("raftmaster client: %s: value is %s, not bytes" % (call, type(value).__name__))
    return base64.b64encode(bytes(value)).decode("ascii")


def _kv_value(out: Dict[str, Any]) -> KVValue:
    found = bool(out.get("found"))
    value = None
    if found:
        try:
            value = base64.b64decode(out.get("value") or "", validate=True)
        except (binascii.Error, TypeError, ValueError) as e:
            raise errors.RaftmasterError("raftmaster client: the register's answer has a value that is not base64: %s"
                                         % e) from None
    return KVValue(found, value, int(out.get("version") or 0))


def _check_int(call: str, what: str, v: Any, negative: bool = False) -> None:
    """ValueError unless v is a positive integer (any integer with negative)."""
    if isinstance(v, bool) or not isinstance(v, int) or (not negative and v <= 0):
        raise ValueError("raftmaster client: %s: %s %r is not %s integer"
                         % (call, what, v, "an" if negative else "a positive"))


def _progress_body(progress: Iterable[ProgressEntry]) -> List[Dict[str, Any]]:
    """Progress entries in their wire form; ValueError for a malformed one."""
    out: List[Dict[str, Any]] = []
    for p in progress:
        if isinstance(p, dict):
            meta, consumed = p.get("meta"), p.get("consumed")
        else:
            meta, consumed = p
        if isinstance(meta, Task):
            meta = meta.meta
        try:
            if isinstance(meta, TaskMeta):
                m = {"id": int(meta.id), "epoch": int(meta.epoch)}
            else:
                m = {"id": int(meta["id"]), "epoch": int(meta["epoch"])}  # type: ignore[index]
            n = int(consumed)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("raftmaster client: progress entry %r: want {\"meta\": {\"id\", \"epoch\"}, "
                             "\"consumed\": k}" % (p,)) from e
        if n < 0:
            raise ValueError("raftmaster client: progress entry %r: negative consumed offset" % (p,))
        out.append({"meta": m, "consumed": n})
    if len(out) > MAX_PROGRESS:
        raise ValueError("raftmaster client: %d progress entries, more than %d" % (len(out), MAX_PROGRESS))
    return out


_SOURCE_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def _check_source_name(call: str, name: Any) -> str:
    """name, a valid source name; ValueError otherwise."""
    if not isinstance(name, str):
        raise ValueError("raftmaster client: %s: source name %r is not a string" % (call, name))
    if not name or len(name) > MAX_SOURCE_NAME:
        raise ValueError("raftmaster client: %s: source name %r: want 1 to %d characters"
                         % (call, name[:MAX_SOURCE_NAME + 8], MAX_SOURCE_NAME))
    if not set(name) <= _SOURCE_NAME_CHARS:
        raise ValueError("raftmaster client: %s: source name %r: only letters, digits, '_', '-' and '.'"
                         % (call, name))
    return name


def _check_weight(call: str, name: str, weight: Any) -> float:
    """weight as a float, when it is a number in [0, MAX_WEIGHT]; ValueError otherwise."""
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise ValueError("raftmaster client: %s: source %r: weight %r is not a number" % (call, name, weight))
    w = float(weight)
    if not math.isfinite(w) or not 0 <= w <= MAX_WEIGHT:
        raise ValueError("raftmaster client: %s: source %r: weight %r out of range [0, %g]"
                         % (call, name, weight, MAX_WEIGHT))
    return w


def _check_keys(call: str, what: str, d: Mapping[Any, Any], want: Tuple[str, ...]) -> None:
    """ValueError unless dict d has exactly the keys want."""
    missing = [k for k in want if k not in d]
    unknown = sorted(repr(k) for k in d if k not in want)
    if missing or unknown:
        raise ValueError("raftmaster client: %s: %s %r: want the keys %s%s%s"
                         % (call, what, d, ", ".join(want),
                            "; missing: " + ", ".join(missing) if missing else "",
                            "; unknown: " + ", ".join(unknown) if unknown else ""))


def _millionths(weight: float) -> int:
    """A weight as the cluster counts it, in millionths."""
    return int(round(weight * 1_000_000))


def _sources_body(sources: Iterable[SourceArg]) -> List[Dict[str, Any]]:
    """set_dataset's sources in their wire form; ValueError for bad ones."""
    call = "set_dataset"
    if isinstance(sources, (str, bytes, bytearray, Mapping)) or not isinstance(sources, Iterable):
        raise ValueError("raftmaster client: %s: sources %r: want a list of (name, weight, globs) or of dicts "
                         "with those keys" % (call, sources))
    items = list(sources)
    if not items:
        raise ValueError("raftmaster client: %s: sources is empty: give at least one source" % call)
    if len(items) > MAX_SOURCES:
        raise ValueError("raftmaster client: %s: %d sources, more than %d" % (call, len(items), MAX_SOURCES))
    out: List[Dict[str, Any]] = []
    for k, src in enumerate(items):
        if isinstance(src, Mapping):
            _check_keys(call, "source %d" % k, src, ("name", "weight", "globs"))
            name, weight, globs = src["name"], src["weight"], src["globs"]
        elif isinstance(src, (tuple, list)) and len(src) == 3:
            name, weight, globs = src
        else:
            raise ValueError("raftmaster client: %s: source %d %r: want (name, weight, globs) or a dict with those "
                             "keys" % (call, k, src))
        name = _check_source_name(call, name)
        if any(o["name"] == name for o in out):
            raise ValueError("raftmaster client: %s: source %r is named twice" % (call, name))
        w = _check_weight(call, name, weight)
        if isinstance(globs, str):
            globs = [globs]
        elif isinstance(globs, (bytes, bytearray, Mapping)) or not isinstance(globs, Iterable):
            raise ValueError("raftmaster client: %s: source %r: globs %r: want a pattern or a list of patterns"
                             % (call, name, globs))
        patterns = list(globs)
        if not patterns:
            raise ValueError("raftmaster client: %s: source %r has no glob pattern" % (call, name))
        for g in patterns:
            if not isinstance(g, str) or not g:
                raise ValueError("raftmaster client: %s: source %r: glob %r is not a non-empty string"
                                 % (call, name, g))
        out.append({"name": name, "weight": w, "globs": patterns})
    if not any(_millionths(src["weight"]) for src in out):
        raise ValueError("raftmaster client: %s: every source has weight 0 (weights count in millionths): give "
                         "at least one a weight" % call)
    return out


def _weights_body(call: str, weights: Mapping[str, float]) -> Dict[str, float]:
    """Weights by source name in their wire form; ValueError for bad ones."""
    if not isinstance(weights, Mapping):
        raise ValueError("raftmaster client: %s: weights %r: want a dict of source name to weight, such as "
                         "{\"web\": 0.4, \"code\": 0.4}" % (call, weights))
    if not weights:
        raise ValueError("raftmaster client: %s: weights name no source" % call)
    if len(weights) > MAX_SOURCES:
        raise ValueError("raftmaster client: %s: %d weights, more than %d sources" % (call, len(weights), MAX_SOURCES))
    return {_check_source_name(call, name): _check_weight(call, name, w) for name, w in weights.items()}


def _schedule_body(steps: Iterable[StepArg]) -> List[Dict[str, Any]]:
    """A weight schedule in its wire form; ValueError for a bad one."""
    call = "set_weight_schedule"
    if isinstance(steps, (str, bytes, bytearray, Mapping)) or not isinstance(steps, Iterable):
        raise ValueError("raftmaster client: %s: steps %r: want a list of (at_records, {name: weight})"
                         % (call, steps))
    items = list(steps)
    if len(items) > MAX_SCHEDULE_STEPS:
        raise ValueError("raftmaster client: %s: %d steps, more than %d" % (call, len(items), MAX_SCHEDULE_STEPS))
    out: List[Dict[str, Any]] = []
    for k, step in enumerate(items):
        if isinstance(step, Mapping):
            _check_keys(call, "step %d" % k, step, ("at_records", "weights"))
            at, weights = step["at_records"], step["weights"]
        elif isinstance(step, (tuple, list)) and len(step) == 2:
            at, weights = step
        else:
            raise ValueError("raftmaster client: %s: step %d %r: want (at_records, {name: weight})" % (call, k, step))
        if isinstance(at, bool) or not isinstance(at, numbers.Integral) or at < 0:
            raise ValueError("raftmaster client: %s: step %d: at_records %r is not an integer >= 0" % (call, k, at))
        at = int(at)
        if out and at <= out[-1]["at_records"]:
            raise ValueError("raftmaster client: %s: step %d: at %d records, not after the step before (%d): steps "
                             "go in increasing at_records" % (call, k, at, out[-1]["at_records"]))
        out.append({"at_records": at, "weights": _weights_body("%s: step %d" % (call, k), weights)})
    return out


def _source_status(s: Dict[str, Any]) -> SourceStatus:
    return SourceStatus(name=str(s.get("name") or ""), weight=float(s.get("weight") or 0.0),
                        pass_id=int(s.get("pass") or 0), tasks=int(s.get("tasks") or 0), todo=int(s.get("todo") or 0),
                        pending=int(s.get("pending") or 0), done=int(s.get("done") or 0),
                        failed=int(s.get("failed") or 0), records=int(s.get("records") or 0),
                        finished=int(s.get("finished") or 0), globs=tuple(s.get("globs") or ()))


def _mixture(out: Dict[str, Any]) -> Mixture:
    """A mixture from the answer to a weight change or from a job's description."""
    sources = tuple(_source_status(s) for s in out.get("sources") or [])
    schedule = tuple(WeightStep(int(st.get("at_records") or 0),
                                {str(k): float(v) for k, v in (st.get("weights") or {}).items()})
                     for st in out.get("schedule") or [])
    # The job's records are its sources' (the answer to a weight change
    # does not repeat them).
    records = int(out.get("records") or 0) or sum(s.records for s in sources)
    return Mixture(sources, schedule, records)


def _cursor_info(c: Dict[str, Any]) -> CursorInfo:
    return CursorInfo(id=int(c.get("id") or 0), step=int(c.get("step") or 0), pass_id=int(c.get("pass") or 0),
                      tasks=int(c.get("tasks") or 0), finished=int(c.get("finished") or 0),
                      in_flight=int(c.get("in_flight") or 0), records=int(c.get("records") or 0),
                      generation=int(c.get("generation") or 0), bytes=int(c.get("bytes") or 0),
                      created_at=str(c.get("created_at") or ""))


def _padded(outcomes: Sequence[Optional[errors.FinishOutcome]], n: int) -> List[Optional[errors.FinishOutcome]]:
    """outcomes cut or padded with None (did not say) to n."""
    return (list(outcomes) + [None] * n)[:max(n, 0)]


def batch_unsupported(e: errors.RaftmasterError) -> bool:
    """Whether e refuses a get_tasks batch because the cluster does not
    take it yet: as finish_unsupported, for the fields of level 10."""
    if finish_unsupported(e):
        return True
    msg = e.message or ""
    return e.code == "invalid" and any('unknown field "%s"' % f in msg for f in ("count", "more_finished", "more"))


def finish_unsupported(e: errors.RaftmasterError) -> bool:
    """Whether e refuses a get_task that carried a finished task because
    the cluster does not take it yet: Unavailable below protocol level 9
    ("not upgraded"), or Invalid from a node of a release before the
    field."""
    if isinstance(e, errors.UpgradePending):
        return True
    if e.code == "unavailable":
        return "not upgraded" in (e.message or "")
    if e.code == "invalid":
        return 'unknown field "finished"' in (e.message or "")
    return False


def _task(out: Dict[str, Any]) -> Task:
    t = out.get("task") or {}
    meta = t.get("meta") or {}
    lease = t.get("lease")
    return Task(
        meta=TaskMeta(int(meta.get("id", 0)), int(meta.get("epoch", 0))),
        chunks=[Chunk(str(c["path"]), int(c["offset"]), int(c["records"])) for c in t.get("chunks") or []],
        pass_id=int(t.get("pass", 0)),
        lease=parse_duration(lease) if isinstance(lease, str) and lease else 0.0,
        applied_at=str(out.get("applied_at") or ""),
        session=int(t.get("session") or 0),
        skip=int(t.get("skip") or 0),
        seed=int(t.get("seed") or 0),
        source=str(t["source"]) if t.get("source") else None,
        finish=errors.finish_from_wire(out.get("finish")),
    )


__all__ = ["Client", "Task", "TaskMeta", "Chunk", "FinishOutcome", "DatasetResult", "SaveModelGrant", "AllgatherResult",
           "KVValue", "KVResult", "DEFAULT_TIMEOUT", "DEFAULT_SESSION_TTL", "SESSION_PROTOCOL",
           "close_recorded_sessions",
           "CURSOR_PROTOCOL", "SHUFFLE_PROTOCOL", "MAX_PROGRESS", "ProgressEntry", "CursorInfo", "CursorTask",
           "CursorDetail", "CursorList", "RestoreResult", "MIXTURE_PROTOCOL", "MAX_SOURCES", "MAX_WEIGHT",
           "MAX_SCHEDULE_STEPS", "MAX_SOURCE_NAME",
           "MAX_TASKS_PER_GET", "SourceArg", "StepArg", "SourceStatus", "WeightStep", "Mixture"]
