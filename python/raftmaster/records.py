"""The record iterator of a pass: the Go client's StartGetRecords/NextRecord
(client/records.go) as a Python iterator."""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import errors, objstore, recordio
from ._transport import Cancelled

if TYPE_CHECKING:
    from .client import Client, Task, TaskMeta

log = logging.getLogger("raftmaster")

# Bounds of the wait before asking again for a pass that has not started.
PASS_WAIT_MIN = 1.0
PASS_WAIT_MAX = 3.0
# Bound on the report of a task handed back by close.
ABANDON_TIMEOUT = 5.0
# Lease renewals: a third of the lease, at least RENEW_FLOOR; RENEW_FALLBACK
# when the server did not say how long the lease lasts.
RENEW_FLOOR = 0.1
RENEW_FALLBACK = 20.0
# How long, in seconds, the iterator reports its tasks finished on their
# own after a cluster below protocol level 9 refused a get_task that
# carried a finish, before it tries again.
RIDE_RETRY = 60.0


def _transient(e: errors.RaftmasterError) -> bool:
    """A failure to reach the cluster or to find its leader, which may heal, rather than an answer.
    NoContact, a cluster never reached (wrong addresses), is not."""
    if e.code:
        return e.retryable
    return not isinstance(e, (errors.ClientClosed, Cancelled, errors.NoContact))


class _Renewer:
    """Renews a task's lease every third of its length until stopped or the lease is lost."""

    def __init__(self, client: "Client", task: "Task") -> None:
        self._c = client
        self._task = task
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="raftmaster-renew-%d" % task.meta.id, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t = self._task
        every = max(t.lease / 3, RENEW_FLOOR) if t.lease > 0 else RENEW_FALLBACK
        while not self._stop.wait(every):
            try:
                lease = self._c._report("/v1/task/renew", t.meta, cancel=self._stop)
                if lease > 0:
                    # A new leader's grace may have made the first lease
                    # longer than the renewed ones, and a renewal retried
                    # after the cluster applied it says what remains.
                    every = max(lease / 3, RENEW_FLOOR)
            except (errors.ClientClosed, Cancelled):
                return
            except errors.StaleEpoch as e:
                # The task may go to another trainer; its records are still
                # delivered here, and a late finish is accepted.
                log.warning("task %d epoch %d: lease lost: %s", t.meta.id, t.meta.epoch, e)
                return
            except errors.RaftmasterError as e:
                if _transient(e):
                    log.warning("task %d epoch %d: cannot renew the lease: %s", t.meta.id, t.meta.epoch, e)
                    continue
                log.warning("task %d epoch %d: cannot renew the lease; giving up: %s", t.meta.id, t.meta.epoch, e)
                return

    def stop(self) -> None:
        """Stop renewing, and wait for a renewal in flight: it would race with the report."""
        self._stop.set()
        self._thread.join()


class PassRecords:
    """This trainer's share of the records of one pass; see Client.records.

    A record is consumed once ``next()`` returns it: the iterator counts,
    for the task it reads, how many of its records were consumed (its
    consumed offset, from the task's record 0, counting the records a
    restored cursor skipped: Task.skip), which ``progress()`` gives for
    Client.commit_cursor and Client.report_progress, and reports the task
    finished only once all of its records were.

    With ``finish`` False the iterator reports no task finished: a task
    whose last record was taken stays leased (held by the session, which
    needs no renewal), for the caller, which knows when its records are
    consumed (another process, such as the main process of a DataLoader),
    to report it finished with its meta, which ``last`` names with each
    record's offset.
    """

    def __init__(self, client: "Client", pass_id: int, *, skip_damaged: bool = False, finish: bool = True,
                 shuffle_buffer: int = 0) -> None:
        self.pass_id = pass_id
        #: The error that ended the pass: PassBefore, NoMoreAvailable, or
        #: the error raised; None while the pass goes on.
        self.end: Optional[errors.RaftmasterError] = None
        #: How many tasks this iterator leased.
        self.tasks = 0
        #: Where the record next() returned last comes from: its task's
        #: meta, its offset in the task and the task's record count; None
        #: before the first.
        self.last: Optional[Tuple["TaskMeta", int, int]] = None
        self._c = client
        self._skip_damaged = skip_damaged
        self._finish = finish
        self._shuffle_buffer = shuffle_buffer
        self._done = False
        self._task: Optional["Task"] = None
        self._renewer: Optional[_Renewer] = None
        # The records of the task being read from its record _first on
        # (its skip), _pos of them consumed, of _count in the task.
        self._recs: List[bytes] = []
        self._first = 0
        self._pos = 0
        self._count = 0
        self._wait = PASS_WAIT_MIN
        self._lock = threading.Lock()

    def __iter__(self) -> "PassRecords":
        return self

    def __enter__(self) -> "PassRecords":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __next__(self) -> bytes:
        while True:
            t = self._task
            finished: Optional["TaskMeta"] = None
            if t is not None:
                if self._pos < len(self._recs):
                    rec = self._recs[self._pos]
                    with self._lock:
                        self._pos += 1
                    self.last = (t.meta, self._first + self._pos - 1, self._count)
                    return rec
                finished = self._settle()
            if self._done:
                raise StopIteration
            self._lease(finished)

    def progress(self) -> List[Dict[str, Any]]:
        """The consumed offset of the task being read, as a list of the
        entries Client.commit_cursor and Client.report_progress take
        (``{"meta": {"id", "epoch"}, "consumed": k}``): empty when no
        record of a task is consumed. The tasks read before were all
        consumed, and are reported finished (unless ``finish`` is False)."""
        with self._lock:
            t, consumed = self._task, self._first + self._pos
        if t is None or consumed == 0:
            return []
        return [{"meta": {"id": t.meta.id, "epoch": t.meta.epoch}, "consumed": consumed}]

    def _settle(self) -> Optional["TaskMeta"]:
        """Stop renewing the task held, whose records were all consumed, and
        return its meta, for the get_task that leases the next task to
        carry its finish; None when it is reported on its own (while the
        cluster is below protocol level 9) or left to the caller (without
        ``finish``)."""
        c = self._c
        if not self._finish or c._t.closed.is_set() or time.monotonic() < c._rides_off_until:
            self._release(finished=True)
            return None
        with self._lock:
            t, renewer = self._task, self._renewer
            self._task, self._renewer, self._recs, self._pos, self._first, self._count = None, None, [], 0, 0, 0
        if renewer is not None:
            renewer.stop()
        return t.meta if t is not None else None

    def _ask(self, finished: Optional["TaskMeta"]) -> "Task":
        """get_task for the pass, carrying the finish of ``finished`` when
        given: whatever the answer, that finish is then carried, reported
        on its own, or (its session having ended) dropped, as _release
        would."""
        c = self._c
        if finished is None:
            return c.get_task(self.pass_id)
        try:
            t = c.get_task(self.pass_id, finished=finished)
        except errors.UpgradePending as e:
            c._rides_off_until = time.monotonic() + RIDE_RETRY
            log.info("pass %d: the cluster takes no finish with a lease yet; tasks are reported finished on their "
                     "own for %gs: %s", self.pass_id, RIDE_RETRY, e)
            self._finished_alone(finished)
            return c.get_task(self.pass_id)
        except errors.SessionExpired:
            self._session_ended(finished)
            raise
        except errors.RaftmasterError as e:
            self._finish_went(finished, e.finish)
            raise
        self._finish_went(finished, t.finish)
        return t

    def _finish_went(self, meta: "TaskMeta", outcome: Optional[errors.FinishOutcome]) -> None:
        """Handle how the finish of meta that a get_task carried went, as
        _release handles the answer to task_finished; report it on its own
        when the answer did not say."""
        if outcome is None:
            self._finished_alone(meta)
        elif outcome.error is not None:
            e = outcome.error
            if isinstance(e, errors.NoDataset) and self._c._read.reported(e):
                e = self._c._job_gone()
            log.warning("task %d epoch %d: cannot report the task finished: %s", meta.id, meta.epoch, e)
        elif outcome.ignored:
            log.debug("task report ignored: /v1/task/get task %d epoch %d", meta.id, meta.epoch)

    def _finished_alone(self, meta: "TaskMeta") -> None:
        """Report the task of meta finished on its own."""
        if self._c._t.closed.is_set():
            return
        try:
            # Not exactly when its records were used, but close enough, as
            # in the original.
            self._c._report("/v1/task/finished", meta)
        except errors.SessionExpired:
            self._session_ended(meta)
        except errors.RaftmasterError as e:
            log.warning("task %d epoch %d: cannot report the task finished: %s", meta.id, meta.epoch, e)

    @staticmethod
    def _session_ended(meta: "TaskMeta") -> None:
        # The session that held it ended, and the task went back to the
        # job, where another trainer may hold it now: the report of the
        # ended session is not made under the next one, so that it never
        # counts against that trainer's.
        log.warning("task %d epoch %d: its session ended before it was reported finished; "
                    "it went back to the job", meta.id, meta.epoch)

    def _lease(self, finished: Optional["TaskMeta"] = None) -> None:
        """Lease the next task and read its records, or end the pass; the
        first get_task carries the finish of ``finished``, when given."""
        c = self._c
        while not self._done:
            carried, finished = finished, None
            try:
                t = self._ask(carried)
            except (errors.PassBefore, errors.NoMoreAvailable) as e:
                log.debug("pass %d ends: %s", self.pass_id, e)
                self._end(e)
                return
            except errors.StaleEpoch as e:
                # A retried get_task whose lease ended meanwhile: the task is
                # back in the queue, and a new request may lease it.
                log.debug("lease of a retried get_task ended; asking again: %s", e)
                continue
            except errors.SessionExpired as e:
                # The client's session ended (its keep-alives stopped for its
                # TTL): nothing was leased, and the next request opens a new
                # session.
                log.debug("pass %d: asking again under a new session: %s", self.pass_id, e)
                continue
            except errors.ClientClosed as e:
                self._end(e)
                raise
            except errors.RaftmasterError as e:
                if isinstance(e, (errors.PassAfter, errors.NoDataset)) or _transient(e):
                    # PassAfter: others are finishing the previous pass, and a
                    # task of it that comes back is handed to us. NoDataset:
                    # nobody has set it yet. Otherwise the cluster was
                    # unreachable or leaderless for the whole retry budget.
                    if isinstance(e, (errors.PassAfter, errors.NoDataset)):
                        log.debug("pass %d: waiting: %s", self.pass_id, e)
                    else:
                        log.warning("pass %d: cannot get a task: %s", self.pass_id, e)
                    if not c._t.sleep(self._wait / 2 + random.uniform(0, self._wait / 2)):
                        self._end(errors.ClientClosed())
                        raise errors.ClientClosed() from None
                    self._wait = min(2 * self._wait, PASS_WAIT_MAX)
                    continue
                # The cluster would answer the same again: tell the trainer.
                log.error("pass %d: cannot get a task: %s", self.pass_id, e)
                self._end(e)
                raise
            self._wait = PASS_WAIT_MIN
            self.tasks += 1
            # A task held by the client's session needs no renewal: the
            # session's keep-alives carry its progress instead.
            renewer = _Renewer(c, t) if not t.session else None
            try:
                recs, first = _read_task(t, self._shuffle_buffer)
            except errors.ChunkError as e:
                if renewer is not None:
                    renewer.stop()
                log.error("task %d epoch %d: cannot read the task: %s", t.meta.id, t.meta.epoch, e)
                try:
                    c._report("/v1/task/failed", t.meta)
                except errors.ClientClosed:
                    raise
                except errors.RaftmasterError as re:
                    log.warning("task %d: cannot report a failed task: %s", t.meta.id, re)
                # Damaged data stays damaged: show it once per task and pass.
                # An I/O error may be new each time.
                if not e.corrupt or c._first_shown(t.meta.id, t.pass_id):
                    if not self._skip_damaged:
                        raise
                    log.warning("skipping a task whose data cannot be read: %s", e)
                continue
            with self._lock:
                self._task, self._renewer, self._recs, self._pos = t, renewer, recs, 0
                self._first, self._count = first, t.record_count
            return

    def _held(self) -> Optional[Tuple["Task", int]]:
        """The task being read, if the client's session holds it, and how
        many of its records were taken: its progress, for the keep-alives."""
        with self._lock:
            t, pos = self._task, self._first + self._pos
        if t is None or not t.session:
            return None
        return t, pos

    def _end(self, e: errors.RaftmasterError) -> None:
        self.end = e
        self._done = True

    def _release(self, finished: bool) -> None:
        """Stop renewing the task held and report it: finished once its last
        record was consumed, else failed (handed back, within
        ABANDON_TIMEOUT). Without ``finish``, a task whose records were all
        taken is left to the caller."""
        with self._lock:
            t, renewer = self._task, self._renewer
            self._task, self._renewer, self._recs, self._pos, self._first, self._count = None, None, [], 0, 0, 0
        if t is None:
            return
        if renewer is not None:
            renewer.stop()
        if self._c._t.closed.is_set() or (finished and not self._finish):
            return
        if finished:
            self._finished_alone(t.meta)
            return
        try:
            self._c._report("/v1/task/failed", t.meta, budget=ABANDON_TIMEOUT)
        except errors.SessionExpired:
            pass  # the session that held it ended: the task is back already
        except errors.RaftmasterError as e:
            log.warning("task %d epoch %d: cannot report the task handed back: %s", t.meta.id, t.meta.epoch, e)

    def close(self) -> None:
        """End the iteration. A task whose records were all consumed is
        reported finished (without ``finish``, left to the caller); one in
        the middle is reported failed, so that it is dispatched again at
        once rather than at the end of its lease."""
        if self._task is not None:
            self._release(finished=self._pos >= len(self._recs))
        if not self._done:
            self._done = True


def task_rng(t: "Task") -> random.Random:
    """The generator of the shuffle of task t's records: seeded from the
    job's seed, the task's pass and its id, each below 2**64, so that
    every reader of the task draws the same numbers."""
    return random.Random((t.seed % (1 << 64)) << 128 | (t.pass_id % (1 << 64)) << 64 | t.meta.id % (1 << 64))


def shuffle_records(recs: List[Any], buffer: int, rng: random.Random) -> List[Any]:
    """recs in the order a shuffle buffer of buffer records gives them, as
    tf.data's shuffle: the buffer fills with the first records; then each
    record read takes the place of one drawn at random from the buffer,
    which is yielded; at the end the buffer is yielded in random order."""
    if buffer <= 1 or len(recs) <= 1:
        return list(recs)
    out: List[Any] = []
    buf: List[Any] = []
    for r in recs:
        if len(buf) < buffer:
            buf.append(r)
            continue
        i = rng.randrange(buffer)
        out.append(buf[i])
        buf[i] = r
    while buf:
        i = rng.randrange(len(buf))
        buf[i], buf[-1] = buf[-1], buf[i]
        out.append(buf.pop())
    return out


def _read_task(t: "Task", shuffle_buffer: int = 0) -> Tuple[List[bytes], int]:
    """Read and verify the chunks of t that hold its records from t.skip on,
    and return those records with the offset of the first in the task; a
    ChunkError for the first chunk that cannot be read. With
    shuffle_buffer, every chunk is read and the task's records shuffled
    (shuffle_records, task_rng) before the skip: t.skip counts records of
    the shuffled order."""
    if shuffle_buffer > 0:
        whole, _ = _read_task(replace(t, skip=0))
        skip = min(max(t.skip, 0), len(whole))
        return shuffle_records(whole, shuffle_buffer, task_rng(t))[skip:], skip
    recs: List[bytes] = []
    skip = min(max(t.skip, 0), t.record_count)
    base = 0  # the offset in the task of the chunk's first record
    f = None
    path = ""
    try:
        for i, ch in enumerate(t.chunks):
            if base + ch.records <= skip:
                base += ch.records  # consumed before the cursor: not read
                continue
            try:
                if f is None or ch.path != path:
                    if f is not None:
                        f.close()
                        f = None
                    f = objstore.open_chunk_file(ch.path)
                    path = ch.path
                with recordio.RangeReader(f, recordio.new_chunk_index(ch.offset, ch.records)) as r:
                    got = list(r)
            except recordio.ChunkError as e:
                # Its message would repeat the file and offset.
                raise errors.ChunkError(ch.path, i, e.offset, t.meta, e.err) from e
            except (OSError, recordio.RecordIOError) as e:
                raise errors.ChunkError(ch.path, i, ch.offset, t.meta, e) from e
            recs.extend(got[max(skip - base, 0):])
            base += ch.records
    finally:
        if f is not None:
            f.close()
    return recs, skip
