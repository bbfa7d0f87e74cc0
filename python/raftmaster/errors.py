"""Errors of the raftmaster client.

Every error the client raises is a :class:`RaftmasterError`. An error the
cluster answered carries its wire code (``code``), its HTTP status
(``status``) and, for outcomes of an applied command, the FSM time it was
applied at (``applied_at``). Each wire code has its own class, named after
the Go client's sentinel (``ErrPassBefore`` is :class:`PassBefore`) or, for
the transport's codes, after the code (``unauthorized`` is
:class:`Unauthorized`), so that trainer code matches them with ``except``.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class RaftmasterError(Exception):
    """The base of every error of the raftmaster client.

    ``code`` is the wire code ("" for errors that did not come from the
    cluster), ``status`` the HTTP status it came with (0 when none),
    ``applied_at`` the FSM time of an applied command's outcome (RFC 3339,
    "" when none) and ``message`` the cluster's or the client's account.
    """

    #: The wire code of the class; "" for errors made by the client.
    code = ""
    #: Whether a request that failed with this error may be sent again
    #: with the same request id (the Go client's rpc.Retryable).
    retryable = False

    def __init__(self, message: str = "", *, code: Optional[str] = None,
                 status: int = 0, applied_at: str = "", context: str = "") -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.applied_at = applied_at
        #: What the client was doing, such as how long it retried ("" when nothing to add).
        self.context = context

    def __str__(self) -> str:
        if self.code and self.message:
            s = "%s: %s" % (self.code, self.message)
        else:
            s = self.message or self.code or self.__class__.__name__
        return "%s: %s" % (self.context, s) if self.context else s


# The outcomes of the state machine, named as the original's sentinels.

class PassBefore(RaftmasterError):
    """The pass asked for has already ended."""
    code = "pass_before"


class PassAfter(RaftmasterError):
    """The pass asked for has not started yet; wait for the current pass to finish."""
    code = "pass_after"


class NoMoreAvailable(RaftmasterError):
    """Every task of the pass is dispatched or done, but some are still pending on other trainers."""
    code = "no_more_available"


class AllTaskFailed(RaftmasterError):
    """Every task has failed more than failure_max times; the pass cannot complete."""
    code = "all_task_failed"


class NoDataset(RaftmasterError):
    """No dataset has been set yet."""
    code = "no_dataset"


class UnknownTask(RaftmasterError):
    """The task id does not exist in the dataset."""
    code = "unknown_task"


class StaleEpoch(RaftmasterError):
    """The task is no longer leased under that epoch."""
    code = "stale_epoch"


class Closed(RaftmasterError):
    """The member left, or the group closed, before the allgather completed."""
    code = "closed"


class Reconnected(RaftmasterError):
    """A later join with the same member id replaced this one."""
    code = "reconnected"


class AllGatherTimeoutExceeded(RaftmasterError):
    """The allgather group did not fill up in time."""
    code = "allgather_timeout"


class GroupMismatch(RaftmasterError):
    """A join disagrees with the group's num_peers, or the group is complete and the member is not part of it."""
    code = "group_mismatch"


class Invalid(RaftmasterError):
    """The request is malformed or out of limits; nothing changed."""
    code = "invalid"


class LimitExceeded(RaftmasterError):
    """The request would take its job or the cluster past a configured limit, which the message names; nothing
    changed."""
    code = "limit_exceeded"


class UnknownJob(RaftmasterError):
    """The job named does not exist: from get_task, the record iterator and
    task reports, the job the client read was deleted."""
    code = "unknown_job"


class UnknownClient(RaftmasterError):
    """The cluster does not remember the identity a retried write was sent
    under (it forgot it after the de-duplication window): the write may or
    may not have applied. A first attempt refused so is sent again under a
    new identity, and never raises it."""
    code = "unknown_client"


class TooManyClients(RaftmasterError):
    """The cluster had no room for a new identity (503): its table of
    identities used within the de-duplication window was full; retried."""
    code = "too_many_clients"
    retryable = True


# The transport's codes.

class ForeignClient(RaftmasterError):
    """The identity the write was sent under was created by a request under
    another token (403): identities are bound to the token of their first
    request. Nothing changed."""
    code = "foreign_client"


class NotLeader(RaftmasterError):
    """The node does not lead and could not redirect (503); retried."""
    code = "not_leader"
    retryable = True


class NoLeader(RaftmasterError):
    """No leader is known (503); retried."""
    code = "no_leader"
    retryable = True


class UnknownOutcome(RaftmasterError):
    """The write may or may not have applied (503); retried with the same request id."""
    code = "unknown_outcome"
    retryable = True


class Unavailable(RaftmasterError):
    """The node is not ready: catching up or shutting down (503); retried."""
    code = "unavailable"
    retryable = True


class TooLarge(RaftmasterError):
    """The request body is over the limit (413)."""
    code = "too_large"


class NotFound(RaftmasterError):
    """No such endpoint, or no such cluster member (404)."""
    code = "not_found"


class MethodNotAllowed(RaftmasterError):
    """The endpoint does not take that method (405)."""
    code = "method_not_allowed"


class Internal(RaftmasterError):
    """The server failed, or the answer was not one of the API's (500)."""
    code = "internal"


class Unauthorized(RaftmasterError):
    """No token, or one the server does not know (401); nothing changed."""
    code = "unauthorized"


class Forbidden(RaftmasterError):
    """The token's role may not use the endpoint, or the token does not
    cover the job (403); nothing changed."""
    code = "forbidden"


class RateLimited(RaftmasterError):
    """The token is over its quota of writes or of new identities (429);
    retried with the same request id after Retry-After, and nothing
    changed."""
    code = "rate_limited"
    retryable = True


# Errors of the client itself.

class ClientClosed(RaftmasterError):
    """The client was closed: calls made after close, and calls in flight at close."""

    def __init__(self, message: str = "raftmaster client closed", **kw) -> None:
        super().__init__(message, **kw)


class TransportError(RaftmasterError):
    """The cluster could not be reached, or its answer could not be read.

    The client retries these within its retry budget; this is raised once
    the budget is spent. ``__cause__`` holds the underlying error.
    """
    retryable = True


class NoContact(TransportError):
    """The client never connected to any of its addresses within its
    first-contact timeout: wrong addresses, a cluster that is not running,
    or a TLS mismatch. The message names each address and what it did."""
    retryable = False


class ChunkError(RaftmasterError):
    """A chunk of a leased task could not be read.

    Raised by the record iterator (:meth:`raftmaster.Client.records`) for a
    task whose data could not be read: the task is reported failed and none
    of its records are delivered; the next ``next()`` goes on with the next
    records. ``corrupt`` tells damaged data
    (:class:`raftmaster.recordio.CorruptError`) from an error that may be
    passing, such as a file that cannot be opened.
    """

    def __init__(self, path: str, chunk: int, offset: int, task, err: BaseException) -> None:
        self.path = path
        self.chunk = chunk
        self.offset = offset
        self.task = task
        self.err = err
        super().__init__("%s: chunk at offset %d (chunk %d of task %d, epoch %d): %s"
                         % (path, offset, chunk, task.id, task.epoch, err))

    @property
    def corrupt(self) -> bool:
        """Whether the data is damaged, rather than unreadable for now."""
        from .recordio import CorruptError
        return isinstance(self.err, CorruptError)


_BY_CODE: Dict[str, Type[RaftmasterError]] = {
    cls.code: cls for cls in (
        PassBefore, PassAfter, NoMoreAvailable, AllTaskFailed, NoDataset, UnknownTask,
        StaleEpoch, Closed, Reconnected, AllGatherTimeoutExceeded, GroupMismatch, Invalid,
        LimitExceeded, UnknownJob, UnknownClient, TooManyClients, ForeignClient, NotLeader, NoLeader, UnknownOutcome,
        Unavailable, TooLarge, NotFound, MethodNotAllowed, Internal, Unauthorized, Forbidden, RateLimited,
    )
}

#: The wire codes whose outcome the state machine gave (the original's
#: sentinels); the cluster answers them with 409 unless stated otherwise.
SENTINEL_CODES = frozenset(c.code for c in (
    PassBefore, PassAfter, NoMoreAvailable, AllTaskFailed, NoDataset, UnknownTask,
    StaleEpoch, Closed, Reconnected, AllGatherTimeoutExceeded, GroupMismatch, Invalid,
    LimitExceeded, UnknownJob, UnknownClient, TooManyClients, ForeignClient))


def error_class(code: str) -> Type[RaftmasterError]:
    """Return the class of a wire code, or RaftmasterError for a code this client does not know."""
    return _BY_CODE.get(code, RaftmasterError)


def from_wire(code: str, message: str, status: int = 0, applied_at: str = "") -> RaftmasterError:
    """Build the error of a code and message received from the cluster."""
    cls = error_class(code)
    return cls(message, code=code, status=status, applied_at=applied_at)
