"""Turns at writing one register key, taken in the order they were asked
for: a queue of writers built on the register's add, multi-set, delete and
watch (protocol level 5).

Many writers that race to compare-and-set one key each lose to all the
others in turn: with N of them, N squared attempts for N writes, each
paid in full by the writer that loses it (torch's agents pickle their
rendezvous state for every attempt). In a queue each writer waits, without
polling, for the turn before its own to end, and then wins its first or
second attempt.

The queue is only a way to take turns; it guards nothing. The writers
still compare and set, so a writer outside the queue, or two that both
believe they hold the turn, change nothing they should not.

The keys, under a prefix of the caller's:

``next``
    The tickets handed out (kv_add): a writer's ticket is its place.
``served``
    The ticket whose turn ended last, in decimal.
``<n>``
    Written when turn n ends: the holder of ticket n + 1 watches for it.
    The end of turn n + 1 deletes it, so at most a few exist.

A holder that forgets its turn would hold up everyone behind it. A
writer that waits for its turn and then leaves it unused for ``HOLD``
seconds (its caller gave up, or chose not to write) has it ended by a
thread of the process (:meth:`WriterQueue.hold`). A holder that dies ends
nothing, so a writer that waits reads ``served`` whenever its watch times
out, and when it has not moved for ``stall`` seconds for each turn ahead
of its own, it takes its turn anyway. Only the next in line gives up
quickly; the others see ``served`` move when it does.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import List, Optional, Tuple

from . import errors
from .client import Client

log = logging.getLogger("raftmaster")

# A writer that waits asks how far the queue has got at most this often,
# in seconds, for each turn ahead of its own.
POLL_PER_TURN = 2.0
# ... and at least this often, however far back it is.
POLL_MAX = 30.0
# The queue has stalled when served has not moved for this long, in
# seconds, for each turn ahead of the writer's.
STALL_PER_TURN = 5.0
# A turn left unused for this long, in seconds, is ended for its holder.
HOLD = 2.0


class _Expiry:
    """The one thread of the process that ends the turns left unused past
    their hold (WriterQueue.hold), in the order they fall due."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._due: List[Tuple[float, int, "WriterQueue", int]] = []
        self._order = itertools.count()  # ties in time: first armed, first due
        self._thread: Optional[threading.Thread] = None

    def add(self, when: float, queue: "WriterQueue", ticket: int) -> None:
        with self._cv:
            heapq.heappush(self._due, (when, next(self._order), queue, ticket))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="raftmaster-turns", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._cv.wait(None if not self._due else max(self._due[0][0] - time.monotonic(), 0.0))
                _, _, queue, ticket = heapq.heappop(self._due)
            queue._expire(ticket)


_expiry = _Expiry()


class WriterQueue:
    """One writer's place in the queue of writers of the keys under prefix.

    :meth:`take` waits for a turn, :meth:`release` ends it. It is one
    writer's, not to be used by two threads at once; only the process's
    expiry thread ends its turns besides (:meth:`hold`)."""

    def __init__(self, client: Client, prefix: str, stall: float = STALL_PER_TURN,
                 poll: float = POLL_PER_TURN, poll_max: float = POLL_MAX) -> None:
        self._client = client
        self._prefix = prefix
        #: Seconds without the queue moving, for each turn ahead, after
        #: which a writer takes its turn anyway.
        self.stall = stall
        #: Seconds between looks at the queue, for each turn ahead ...
        self.poll = poll
        #: ... and at most.
        self.poll_max = poll_max
        #: Seconds a turn handed back to the writer's caller stays held.
        self.hold_for = HOLD
        self.ticket = 0  # the ticket of the turn held, 0 when none
        self._before: Optional[str] = None  # the key of the turn before, seen ended
        self._lock = threading.Lock()  # the turn held, between its writer and the expiry thread
        self._hold_until = 0.0
        #: Turns taken; of them, those taken because the queue stalled, and
        #: those ended because they were left unused.
        self.taken = 0
        self.stalled = 0
        self.expired = 0

    @property
    def prefix(self) -> str:
        """The prefix of the queue's keys."""
        return self._prefix

    def held(self) -> bool:
        """Whether this writer holds a turn."""
        return self.ticket != 0

    def _served(self) -> int:
        v = self._client.kv_get(self._prefix + "served")
        try:
            return int(v.value or b"0") if v.found else 0
        except ValueError:
            return 0

    def take(self) -> bool:
        """Take a ticket and wait until the turn before it has ended.
        Returns True when it has, False when the queue stalled and the turn
        is taken anyway. Raises the client's errors; then no turn is held,
        though a ticket may have been handed out (the writers behind it
        wait until the queue is seen stalled)."""
        if self.ticket:
            return True
        n = self._client.kv_add(self._prefix + "next", 1)
        with self._lock:
            self.ticket = n
            self._hold_until = float("inf")
        self.taken += 1
        if n <= 1:
            return True
        before = self._prefix + str(n - 1)
        served = -1
        moved = time.monotonic()
        ahead = 1
        try:
            while True:
                wait = min(self.poll_max, self.poll * ahead)
                w = self._client.kv_watch(before, 0, timeout=wait)
                if w.found:
                    self._before = before
                    return True
                now = time.monotonic()
                seen = self._served()
                if seen != served:
                    served, moved = seen, now
                # The turns between the last one served and this one: the
                # one being served, and those waiting before it.
                ahead = max(n - 1 - served, 1)
                if now - moved >= self.stall * ahead:
                    self.stalled += 1
                    return False
        except BaseException:
            with self._lock:
                self.ticket = 0
            raise

    def hold(self, seconds: Optional[float] = None) -> None:
        """Keep the turn held for seconds (hold_for when None), for the
        writer's next attempt, then end it unless the writer has: call it
        when handing the state back to the writer's caller, which may not
        try again."""
        with self._lock:
            if not self.ticket:
                return
            until = self._hold_until = time.monotonic() + (self.hold_for if seconds is None else seconds)
            ticket = self.ticket
        _expiry.add(until, self, ticket)

    def _expire(self, ticket: int) -> None:
        with self._lock:
            if self.ticket != ticket or time.monotonic() < self._hold_until:
                return  # ended, or held again since
        try:
            self._end(ticket, expired=True)
        except errors.RaftmasterError as e:
            log.warning("raftmaster: the end of an unused turn under %s is not recorded: %s", self._prefix, e)

    def release(self) -> bool:
        """End the turn held, if any: the next writer in line goes on.
        Returns whether there was one."""
        return self._end(0, expired=False)

    def _end(self, ticket: int, expired: bool) -> bool:
        with self._lock:
            n = self.ticket
            if not n or (ticket and n != ticket):
                return False
            self.ticket = 0
            self.expired += expired
            before, self._before = self._before, None
        self._client.kv_multi_set([(self._prefix + str(n), b""), (self._prefix + "served", str(n).encode())])
        if before is not None:
            self._client.kv_delete(before)
        return True
