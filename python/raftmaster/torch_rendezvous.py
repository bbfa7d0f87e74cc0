"""A torchrun rendezvous backend on a raftmaster cluster.

torchrun's dynamic rendezvous keeps its state (who joined which round, their
heartbeats, whether the round is complete) in a backend with a
compare-and-set (:class:`RaftmasterRendezvousBackend`), and hands the agents a
c10d ``Store`` to exchange their ranks, the workers' master address and exit
barriers (:class:`RaftmasterStore`). Both live in a job's register on the
cluster, as the etcd-v2 backend keeps both in etcd: every node of the
rendezvous talks only to the quorum, whose leader may fail at any time,
between a join and the round's completion included; the calls are retried
with their request ids across the failover.

torchrun finds it under the name ``raftmaster`` in one of three ways.
Where torch reads the ``torchrun.handlers`` entry points (releases after
2.4), installing this package is enough: its entry point ``raftmaster``
names :func:`handler_creator`, and stock torchrun takes
``--rdzv-backend raftmaster``. With any release, ``python -m
raftmaster.torchrun`` registers it and runs torchrun::

    python -m raftmaster.torchrun --nnodes 2 --nproc-per-node 8 \\
        --rdzv-backend raftmaster --rdzv-endpoint n1:8001,n2:8001,n3:8001 \\
        --rdzv-id resnet-1 train.py

and :func:`register` adds it to torch's registry in a program of one's own.

The rendezvous configuration (``--rdzv-conf key=value,...``):

``job``
    The raftmaster job whose register holds the rendezvous; by default the
    run id (``--rdzv-id``), which must then be a job name (1 to 63
    characters of a-z, 0-9 and '-'). ``raftmaster job delete`` of it frees
    the rendezvous.
``token``
    The bearer token of a cluster started with ``--auth-tokens`` (a trainer
    token); else the environment's ``RAFTMASTER_TOKEN``, else the first
    line of the file ``RAFTMASTER_TOKEN_FILE`` names, which is better:
    torchrun prints its ``--rdzv-conf``.
``secret``
    Not a configuration key: torchrun prints its ``--rdzv-conf``. The
    run's secret comes from the environment's ``RAFTMASTER_RDZV_SECRET``
    (see below).
``tls_ca``
    A PEM file of the CA certificates of a cluster started with
    ``--tls-cert``; else the environment's ``RAFTMASTER_TLS_CA``. With it,
    endpoints without a scheme are HTTPS.
``read_timeout``
    How long, in seconds, one call to the cluster keeps retrying while it
    has no leader or cannot be reached (60 by default).

The state is signed. torch unpickles the state it reads, so a state
that anyone but the run's agents wrote could run code on them. Each agent
signs the state it writes with HMAC-SHA256, under the run's secret
(``RAFTMASTER_RDZV_SECRET``, the same on every agent) when one is given,
else under a key derived from the job's token; and it checks the signature
of every state it reads before torch sees it. A state whose signature does
not check, or that has none, raises RendezvousStateError and is never
unpickled. With neither a secret nor a token the backend refuses to start.
Give every run its own secret when several share a token.

The keys stay bounded. The agents' store of a run is the register keys
under one prefix (:func:`store_prefix`); once the next round is complete,
the keys of a round are deleted, and once the run is closed, the last of
its final round's agents to shut down deletes the run's store, so a run
holds the keys of at most two rounds however often it restarts, and its
closed state alone at the end (:class:`RaftmasterRendezvousHandler`). That
needs a cluster at protocol level 5; below it the keys stay, counted
against ``--max-job-kv-keys``, and ``delete_key`` and ``num_keys`` raise.

The workers' sessions are closed when they stop. The agent makes a
directory of its own and names it to its workers in
``RAFTMASTER_SESSION_DIR``; each raftmaster Client of a worker (and of its
DataLoader workers) records its session there while it is open. Whenever
the agent goes to a new round, which it does only once its workers have
stopped (one of them failed, or the round's membership changed), and when
it shuts down or exits, it closes every session recorded there, so that the
tasks those workers held come back to their jobs at once rather than after
the sessions' TTL (five seconds by default). A node dropped from a round
whose agent is alive does the same; the sessions of a node that died
entirely end after their TTL. The workers' clients must use the token of
the rendezvous (or no token): the sessions of another token cannot be
closed. The rendezvous itself writes no key attached to a session: its
state and the store's keys are shared by the agents of a round and outlive
any one of them (they are bounded as above), and torch keeps the agents'
heartbeats in the state; so the agents' own client opens no session.

This module needs PyTorch; ``import raftmaster`` does not import it.
"""

from __future__ import annotations

import atexit
import collections
import datetime
import hashlib
import hmac
import logging
import os
import random
import re
import shutil
import ssl
import tempfile
import threading
import time
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union
from urllib.parse import quote

try:
    from torch.distributed import Store
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.api import (RendezvousConnectionError, RendezvousError,
                                                          RendezvousStateError)
    from torch.distributed.elastic.rendezvous.api import rendezvous_handler_registry as handler_registry
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (DynamicRendezvousHandler, RendezvousBackend,
                                                                         Token, create_handler)
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("raftmaster.torch_rendezvous needs PyTorch: apt-get install python3-torch (Debian, Ubuntu) "
                      "or pip install torch") from e

from . import errors
from ._session import SESSION_DIR_ENV
from ._turns import WriterQueue
from .client import KV_STORE_PROTOCOL, Client, close_recorded_sessions

__all__ = ["BACKEND_NAME", "RaftmasterRendezvousBackend", "RaftmasterRendezvousHandler", "RaftmasterStore",
           "WorkerSessions",
           "create_backend", "create_rdzv_handler", "handler_creator", "register", "state_key", "store_key",
           "store_prefix", "signing_key", "SECRET_ENV"]

#: The environment variable of the run's secret, which signs the
#: rendezvous state; without it the state is signed under a key derived
#: from the job's token.
SECRET_ENV = "RAFTMASTER_RDZV_SECRET"

# A signed state: the magic, the HMAC-SHA256 of the state (under the
# signing key, over a label, the register key and the state), the state.
# This release writes the state compressed (zlib) under _MAGIC_ZLIB, its
# HMAC over the compressed bytes: torch's pickled state of a thousand
# nodes, 72 KB, is 12 KB so, in every write, read and replica. It reads
# both.
_MAGIC = b"RMRDZV1\n"
_MAGIC_ZLIB = b"RMRDZV2\n"
_MAC_LEN = 32
# The largest state a compressed one may inflate to: far past any the
# register holds (its values are at most 64 MiB), and a bound on what a
# corrupt one costs.
_MAX_STATE = 256 << 20

#: The name the backend is registered under: ``--rdzv-backend raftmaster``.
BACKEND_NAME = "raftmaster"

#: The retry budget of one call to the cluster, in seconds, unless
#: ``read_timeout`` says otherwise.
DEFAULT_READ_TIMEOUT = 60

_MAX_KEY = 256  # fsm.MaxKVKeyLen
# What a register key may hold as it is: printable ASCII other than space,
# less '%', which escapes the rest.
_KEY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")
_JOB_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

# How often a store read polls for a key that is not there yet, on a
# cluster without the register's watch.
_POLL_MIN = 0.02
_POLL_MAX = 0.5

# How often a store asks again for the protocol level of a cluster below
# KV_STORE_PROTOCOL, in seconds: a rolling upgrade raises it.
_PROBE_EVERY = 30.0

# The keys one multi-get reads, at most (the cluster reads at most its
# max_job_kv_keys, 1,024 by default).
_MULTI_GET_KEYS = 256

# What a store name too long for a key is hashed under, after the run's
# prefix: a percent-escaped name never holds "%%".
_HASHED_NAME = "%%sha256/"

log = logging.getLogger("raftmaster")


def _quote_run(run_id: str) -> str:
    return quote(run_id, safe=_KEY_SAFE.replace("/", ""))


def state_key(run_id: str) -> str:
    """The register key that holds the rendezvous state of run_id:
    printable ASCII, at most 256 bytes, one key per run id. Other bytes,
    '%' and '/' are percent-escaped; a key that would be longer is its
    SHA-256 under "torchrun/rdzv-sha256/"."""
    key = "torchrun/rdzv/" + _quote_run(run_id)
    if len(key) > _MAX_KEY:
        key = "torchrun/rdzv-sha256/" + hashlib.sha256(key.encode("ascii")).hexdigest()
    return key


def store_prefix(run_id: str) -> str:
    """The prefix of the register keys of run_id's store,
    "torchrun/store/<run id>/" (escaped as in state_key), or, for a run id
    too long to leave room for the names, "torchrun/store-sha256/<its
    SHA-256>/". Every key of the store is under it, so that one prefix
    delete removes them all."""
    prefix = "torchrun/store/%s/" % _quote_run(run_id)
    if len(prefix) > _MAX_KEY - len(_HASHED_NAME) - 64:
        prefix = "torchrun/store-sha256/%s/" % hashlib.sha256(prefix.encode("ascii")).hexdigest()
    return prefix


def store_key(run_id: str, name: Union[str, bytes]) -> str:
    """The register key that holds the store key name of run_id's agents:
    its prefix (store_prefix), then the name, percent-escaped as a key
    needs ('/' kept); a name too long for a key is its SHA-256 under
    "%%sha256/", which no escaped name can start with."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    prefix = store_prefix(run_id)
    key = prefix + quote(name, safe=_KEY_SAFE)
    if len(key) > _MAX_KEY:
        key = prefix + _HASHED_NAME + hashlib.sha256(key.encode("ascii")).hexdigest()
    return key


def signing_key(job: str, token: Optional[str] = None, secret: Optional[str] = None) -> bytes:
    """The key that signs the rendezvous state of job: derived from the
    run's secret when one is given (else from the environment's
    RAFTMASTER_RDZV_SECRET), otherwise from the job's token. With neither,
    ValueError: an unsigned state could run code on the agents that read
    it."""
    if secret is None:
        secret = os.environ.get(SECRET_ENV) or None
    if secret:
        base, label = secret.encode(), b"raftmaster rendezvous secret\x00"
    elif token:
        base, label = token.encode(), b"raftmaster rendezvous token\x00"
    else:
        raise ValueError("raftmaster rendezvous: no key to sign the rendezvous state with: set %s to a secret "
                         "of the run (the same on every agent), or use a cluster with tokens and give the job's "
                         "token (RAFTMASTER_TOKEN)" % SECRET_ENV)
    return hmac.new(base, label + job.encode(), hashlib.sha256).digest()


def _mac(key: bytes, register_key: str, state: bytes, label: bytes = b"raftmaster rendezvous state\x00") -> bytes:
    return hmac.new(key, label + register_key.encode() + b"\x00" + state, hashlib.sha256).digest()


# The label of the HMAC of a compressed state: one of them never checks as
# the other.
_ZLIB_LABEL = b"raftmaster rendezvous state zlib\x00"


def _sign(key: bytes, register_key: str, state: bytes) -> bytes:
    packed = zlib.compress(state, 1)
    return _MAGIC_ZLIB + _mac(key, register_key, packed, _ZLIB_LABEL) + packed


def _open(key: bytes, register_key: str, value: bytes) -> bytes:
    """The state that value signs, or RendezvousStateError when value is
    unsigned or its signature does not check: it must never reach
    torch's unpickling (nor, compressed, zlib)."""
    compressed = value.startswith(_MAGIC_ZLIB)
    if not (compressed or value.startswith(_MAGIC)) or len(value) < len(_MAGIC) + _MAC_LEN:
        raise RendezvousStateError("raftmaster rendezvous: the state in %s is not signed; refusing it unread (it was "
                                   "not written by an agent of this run: forged, or by an older release)"
                                   % register_key)
    mac, state = value[len(_MAGIC):len(_MAGIC) + _MAC_LEN], value[len(_MAGIC) + _MAC_LEN:]
    want = _mac(key, register_key, state, _ZLIB_LABEL) if compressed else _mac(key, register_key, state)
    if not hmac.compare_digest(mac, want):
        raise RendezvousStateError("raftmaster rendezvous: the signature of the state in %s does not check; refusing "
                                   "it unread (forged, or written by an agent with another %s or token)"
                                   % (register_key, SECRET_ENV))
    if not compressed:
        return state
    hit = _inflated.get((register_key, mac))
    if hit is not None:
        return hit
    d = zlib.decompressobj()
    try:
        out = d.decompress(state, _MAX_STATE)
    except zlib.error as e:
        raise RendezvousStateError("raftmaster rendezvous: the state in %s is signed but does not decompress: %s"
                                   % (register_key, e)) from None
    if d.unconsumed_tail or not d.eof:
        raise RendezvousStateError("raftmaster rendezvous: the state in %s is signed but truncated or larger than "
                                   "%d bytes decompressed" % (register_key, _MAX_STATE))
    with _inflated_lock:
        _inflated[(register_key, mac)] = out
        while len(_inflated) > _INFLATED_SIZE:
            _inflated.popitem(last=False)
    return out


# The states this process inflated last, by register key and signature
# (checked before the lookup, so only an authentic state is ever served
# from here): an agent that reads a state again while nothing changes, or
# agents of one process that read the same one, inflate it once.
_INFLATED_SIZE = 8
_inflated: "collections.OrderedDict[Tuple[str, bytes], bytes]" = collections.OrderedDict()
_inflated_lock = threading.Lock()


def _connection_error(what: str, e: errors.RaftmasterError) -> RendezvousConnectionError:
    err = RendezvousConnectionError("raftmaster rendezvous: %s: %s" % (what, e))
    err.__cause__ = e
    return err


class RaftmasterRendezvousBackend(RendezvousBackend):
    """The rendezvous state of run_id in a key of the client's job's
    register (:func:`state_key`). The fencing token is the key's version,
    which no key is ever given again: a set_state with a token older than
    the key's changes nothing and answers the state as it is.

    A set_state that loses takes a turn in the run's queue of writers
    (:class:`raftmaster._turns.WriterQueue`, keys under the run's store
    prefix) before it answers: it waits, without polling, until the
    writers that lost before it have each had their turn, then reads the
    state and answers that. torch tries again at once with the state it
    is given, and that attempt, made in its turn, wins unless a writer
    outside the queue came first; the turn ends when a set_state wins, or
    when torch reads the state instead (it chose not to write). Without
    the queue, the agents of a large rendezvous that join together would
    each lose to all the others in turn, a compare-and-set each time (N
    squared of them, each pickled by torch), where with it each wins its
    first or second. A set_state that does not lose pays nothing for the
    queue. ``turns`` False, or a cluster below protocol level 5, backs
    off instead: a random pause, up to twice as long after each loss in a
    row (from ``cas_backoff_min`` to ``cas_backoff_max`` seconds, full
    jitter), then a read.

    The state is signed under key (:func:`signing_key` of the client's job
    and token when None): a state read whose signature does not check
    raises RendezvousStateError, unread."""

    #: The longest pause of the first set_state lost, in seconds.
    cas_backoff_min = 0.01
    #: The longest pause after losses in a row, in seconds.
    cas_backoff_max = 2.0
    #: Whether a set_state that loses takes a turn in the queue of writers.
    turns = True

    def __init__(self, client: Client, run_id: str, key: Optional[bytes] = None) -> None:
        if not run_id:
            raise ValueError("The run id must be a non-empty string.")
        self._client = client
        self._key = state_key(run_id)
        self._sign_key = key if key is not None else signing_key(client.job or "default", client._t.token)
        self._losses = 0  # set_state lost in a row
        self._queue: Optional[WriterQueue] = WriterQueue(client, store_prefix(run_id) + "%turn/")
        self._queue_checked = False  # the cluster's protocol level was read for the queue

    @property
    def name(self) -> str:
        """See base class."""
        return BACKEND_NAME

    @property
    def key(self) -> str:
        """The register key of the state."""
        return self._key

    @property
    def queue(self) -> Optional[WriterQueue]:
        """The run's queue of writers, None once it is not used."""
        return self._queue

    def get_state(self) -> Optional[Tuple[bytes, Token]]:
        """See base class. A turn held ends: torch reads when it has
        nothing to write."""
        self.end_turn()
        return self._read()

    def _read(self) -> Optional[Tuple[bytes, Token]]:
        try:
            v = self._client.kv_get(self._key)
        except errors.RaftmasterError as e:
            raise _connection_error("reading the state", e) from None
        if not v.found:
            return None
        return _open(self._sign_key, self._key, v.value or b""), v.version

    def set_state(self, state: bytes, token: Optional[Token] = None) -> Optional[Tuple[bytes, Token, bool]]:
        """See base class."""
        if token is None or token == 0:
            version = 0
        elif isinstance(token, int) and not isinstance(token, bool) and token > 0:
            version = token
        else:
            # Not a token of this backend: it cannot match.
            cur = self._read()
            return None if cur is None else (cur[0], cur[1], False)
        try:
            r = self._client.kv_cas(self._key, version, _sign(self._sign_key, self._key, state))
        except errors.LimitExceeded as e:
            self.end_turn()
            err = RendezvousStateError("raftmaster rendezvous: the state of %d bytes does not fit: %s"
                                       % (len(state), e))
            err.__cause__ = e
            raise err from None
        except errors.RaftmasterError as e:
            self.end_turn()
            raise _connection_error("writing the state", e) from None
        if not r.found or r.swapped:
            self._losses = 0
            self.end_turn()
            return (state, r.version, True) if r.swapped else None
        if self._queue is not None and self._queue.held():
            # Lost in its turn, to a writer outside the queue: the state
            # answered is the latest, and the turn still this writer's.
            self._queue.hold()
            return _open(self._sign_key, self._key, r.value or b""), r.version, False
        queue = self._take_turn()
        if queue is not None:
            # Held for the next attempt, and ended if none comes.
            queue.hold()
            cur = self._read()
            if cur is None:
                self.end_turn()
                return None
            return cur[0], cur[1], False
        self._losses += 1
        pause = random.uniform(0, min(self.cas_backoff_max, self.cas_backoff_min * 2 ** min(self._losses - 1, 30)))
        if pause <= 0:
            return _open(self._sign_key, self._key, r.value or b""), r.version, False
        # The state answered is as old as the pause: read it again after.
        time.sleep(pause)
        cur = self._read()
        return None if cur is None else (cur[0], cur[1], False)

    def _take_turn(self) -> Optional[WriterQueue]:
        """Wait for a turn in the queue of writers and return the queue;
        None when the queue is not used (turns off, the cluster below
        protocol level 5, or an error of the queue's keys, after which the
        backend backs off instead, as it is only a way to take turns)."""
        queue = self._queue
        if queue is None or not self.turns:
            return None
        try:
            if not self._queue_checked:
                if self._client.protocol() < KV_STORE_PROTOCOL:
                    self._queue = None
                    return None
                self._queue_checked = True
            queue.take()
            return queue
        except errors.RaftmasterError as e:
            log.warning("raftmaster rendezvous: the writers of %s back off instead of taking turns: %s",
                        self._key, e)
            self._queue = None
            return None

    def end_turn(self) -> None:
        """End the turn at writing the state held, if any."""
        if self._queue is None or not self._queue.held():
            return
        try:
            self._queue.release()
        except errors.RaftmasterError as e:
            # The writers behind it see the queue stall, and go on.
            log.warning("raftmaster rendezvous: the end of a turn at writing %s is not recorded: %s", self._key, e)


def _as_bytes(value: Any) -> bytes:
    """A store value as bytes: c10d hands over bytes, str or lists of ints."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class RaftmasterStore(Store):
    """A c10d ``Store`` in the client's job's register, for the agents of
    run_id: each store key is a register key under the run's prefix
    (:func:`store_key`, :func:`store_prefix`).

    On a cluster at protocol level 5 every call is native, each write one
    command applied once: set and multi_set store in one multi-set, add,
    append, compare_set and delete_key are the register's own; get,
    multi_get, wait, check and num_keys are linearizable reads. Below that
    level (a cluster some of whose nodes run an older release) the store
    does what it did before: add, append and compare_set are
    compare-and-set loops, atomic too, set a compare-and-set, multi_set a
    set of each key, and delete_key and num_keys raise RuntimeError. The
    store asks the cluster's level once, and again every half minute while
    it is below.

    A get, multi_get or wait that finds a key missing blocks on the
    register's watch (:meth:`Client.kv_watch`, a long poll at the leader)
    until the key is set, rather than polling; a cluster whose release has
    no watch is polled instead, and asked again for the watch every half
    minute. A read that waits longer than the store's timeout raises
    LookupError.

    The run's keys are bounded: :class:`RaftmasterRendezvousHandler`
    deletes a round's keys once the next round is complete
    (:meth:`forget_round`), and the run's once its last participant shuts
    down (:meth:`forget_run`).
    """

    def __init__(self, client: Client, run_id: str, timeout: Optional[datetime.timedelta] = None) -> None:
        super().__init__()  # the pybind trampoline needs it
        if not run_id:
            raise ValueError("The run id must be a non-empty string.")
        self._client = client
        self._run_id = run_id
        self._prefix = store_prefix(run_id)
        self._lock = threading.Lock()
        self._native_level = False  # the cluster was seen at KV_STORE_PROTOCOL
        self._next_probe = 0.0
        self._watch_from = 0.0  # when to try the watch again after a cluster without it
        self._exited = False
        if timeout is not None:
            self.set_timeout(timeout)

    @property
    def prefix(self) -> str:
        """The prefix of the register keys of the run's store."""
        return self._prefix

    def _key(self, key: Union[str, bytes]) -> str:
        return store_key(self._run_id, key)

    def _call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except errors.RaftmasterError as e:
            raise RuntimeError("raftmaster store: %s: %s" % (what, e)) from e

    def _native(self) -> bool:
        """Whether the cluster has the register's store calls (protocol
        level 5). The level only rises: once seen there it is not asked
        again; below, at most every _PROBE_EVERY seconds."""
        with self._lock:
            if self._native_level or time.monotonic() < self._next_probe:
                return self._native_level
        level = self._call("reading the cluster's protocol level", self._client.protocol)
        with self._lock:
            self._native_level = self._native_level or level >= KV_STORE_PROTOCOL
            self._next_probe = time.monotonic() + _PROBE_EVERY
            return self._native_level

    def _need_native(self, what: str) -> None:
        if not self._native():
            raise RuntimeError("raftmaster store: %s needs a cluster at protocol level %d, whose nodes all run a "
                               "release that can delete and count the register's keys; this cluster is below it "
                               "(raftmaster cluster status shows each node's release)" % (what, KV_STORE_PROTOCOL))

    def _swap(self, key: str, update) -> bytes:
        """Replace the value of register key by update(found, value) until a
        compare-and-set wins; update returns the new value, or None to leave
        the key as it is. Return the key's value afterwards. The fallback of
        a cluster below protocol level 5.

        The first try assumes that the key does not exist, the common case,
        which a compare-and-set at version 0 checks; a failed one answers
        the key as it is."""
        found, value, version, known = False, None, 0, False
        while True:
            new = update(found, value)
            if new is None:
                if known:
                    return value or b""
                cur = self._call("reading %s" % key, self._client.kv_get, key)
                found, value, version, known = cur.found, cur.value, cur.version, True
                continue
            r = self._call("writing %s" % key, self._client.kv_cas, key, version, new)
            if r.swapped:
                return new
            found, value, version, known = r.found, r.value, r.version, True

    def set(self, key: Union[str, bytes], value: Any) -> None:
        """Store value under key."""
        data, rk = _as_bytes(value), self._key(key)
        if self._native():
            self._call("writing %s" % rk, self._client.kv_multi_set, [(rk, data)])
            return
        self._swap(rk, lambda found, cur: data)

    def multi_set(self, keys: List[Union[str, bytes]], values: List[Any]) -> None:
        """Store each value under its key, all in one command (a key given
        twice takes its last value, as c10d's sets them in order)."""
        keys, data = list(keys), [_as_bytes(v) for v in values]
        if len(keys) != len(data):
            raise ValueError("raftmaster store: multi_set: %d keys and %d values" % (len(keys), len(data)))
        if not keys:
            return
        if self._native():
            pairs = dict(zip((self._key(k) for k in keys), data))
            self._call("writing %d keys" % len(pairs), self._client.kv_multi_set, list(pairs.items()))
            return
        for k, v in zip(keys, data):
            self.set(k, v)

    def get(self, key: Union[str, bytes]) -> bytes:
        """The value of key, waiting for it for at most the store's timeout."""
        return self._wait_for([key], self.timeout)[0]  # type: ignore[attr-defined]  # c10d's, absent from torch's stubs

    def multi_get(self, keys: List[Union[str, bytes]]) -> List[bytes]:
        """The values of keys, in order, waiting for them for at most the
        store's timeout."""
        return self._wait_for(list(keys), self.timeout)  # type: ignore[attr-defined]

    def add(self, key: Union[str, bytes], amount: int) -> int:
        """Add amount to the integer under key (0 when there is none) and
        return the sum. A value that is not an integer raises ValueError."""
        rk = self._key(key)
        if self._native():
            try:
                return self._client.kv_add(rk, int(amount))
            except errors.Invalid as e:
                raise ValueError("raftmaster store: add: key %r: %s" % (key, e)) from e
            except errors.RaftmasterError as e:
                raise RuntimeError("raftmaster store: adding to %s: %s" % (rk, e)) from e

        def update(found: bool, cur: Optional[bytes]) -> bytes:
            try:
                base = int(cur) if found and cur else 0
            except ValueError:
                raise ValueError("raftmaster store: add: key %r holds %r, not an integer" % (key, cur)) from None
            return str(base + int(amount)).encode()
        return int(self._swap(rk, update))

    def append(self, key: Union[str, bytes], value: Any) -> None:
        """Append value to the value of key, creating it."""
        data, rk = _as_bytes(value), self._key(key)
        if self._native():
            self._call("appending to %s" % rk, self._client.kv_append, rk, data)
            return
        self._swap(rk, lambda found, cur: (cur or b"") + data)

    def compare_set(self, key: Union[str, bytes], expected_value: Any, desired_value: Any) -> bytes:
        """c10d's compare_set: set key to desired_value if it holds
        expected_value, or if it does not exist and expected_value is
        empty; return the key's value afterwards (expected_value when the
        key does not exist and nothing was set)."""
        expected, desired, rk = _as_bytes(expected_value), _as_bytes(desired_value), self._key(key)
        if self._native():
            r = self._call("writing %s" % rk, self._client.kv_compare_value, rk, expected, desired)
            return (r.value or b"") if r.found else expected
        answer: List[bytes] = []

        def update(found: bool, cur: Optional[bytes]) -> Optional[bytes]:
            answer[:] = []
            if not found:
                if expected:
                    answer.append(expected)
                    return None
                return desired
            return desired if cur == expected else None
        out = self._swap(rk, update)
        return answer[0] if answer else out

    def check(self, keys: Iterable[Union[str, bytes]]) -> bool:
        """Whether every key exists, without waiting."""
        names = [self._key(k) for k in keys]
        if names and self._native():
            return all(v.found for part in _parts(names)
                       for v in self._call("reading %d keys" % len(part), self._client.kv_multi_get, part))
        return all(self._call("reading %s" % name, self._client.kv_get, name).found for name in names)

    def wait(self, keys: Iterable[Union[str, bytes]], timeout: Optional[datetime.timedelta] = None) -> None:
        """Wait for every key to exist, for at most timeout (the store's
        timeout when None)."""
        self._wait_for(list(keys), self.timeout if timeout is None else timeout)  # type: ignore[attr-defined]

    def num_keys(self) -> int:
        """How many keys the run's store holds."""
        self._need_native("num_keys")
        return self._call("counting the keys under %s" % self._prefix, self._client.kv_num_keys, self._prefix)

    def delete_key(self, key: Union[str, bytes]) -> bool:
        """Delete key; return whether it existed."""
        self._need_native("delete_key")
        rk = self._key(key)
        return self._call("deleting %s" % rk, self._client.kv_delete, rk).deleted

    def _wait_for(self, keys: List[Union[str, bytes]], timeout: datetime.timedelta) -> List[bytes]:
        deadline = time.monotonic() + timeout.total_seconds()
        names = [self._key(k) for k in keys]
        values: Dict[int, bytes] = {}
        native = bool(names) and self._native()
        pause = _POLL_MIN
        while True:
            missing = [i for i in range(len(names)) if i not in values]
            if native:
                for part in _parts(missing):
                    got = self._call("reading %d keys" % len(part), self._client.kv_multi_get, [names[i] for i in part])
                    values.update((i, v.value or b"") for i, v in zip(part, got) if v.found)
            else:
                for i in missing:
                    v = self._call("reading %s" % names[i], self._client.kv_get, names[i])
                    if not v.found:
                        break  # wait for it before reading the others again
                    values[i] = v.value or b""
            if len(values) == len(names):
                return [values[i] for i in range(len(names))]
            left = deadline - time.monotonic()
            first = next(i for i in range(len(names)) if i not in values)
            if left <= 0:
                raise LookupError("raftmaster store: key %r of run %r not set within %s"
                                  % (keys[first], self._run_id, timeout))
            if self._watches():
                # Block until the first missing key is set, then read the
                # others again: they may be there already.
                try:
                    v = self._client.kv_watch(names[first], 0, left)
                except errors.NotFound:
                    self._no_watch()
                    continue
                except errors.RaftmasterError as e:
                    raise RuntimeError("raftmaster store: waiting for %s: %s" % (names[first], e)) from e
                if v.found:
                    values[first] = v.value or b""
                continue
            time.sleep(min(random.uniform(pause / 2, pause), left))
            pause = min(pause * 2, _POLL_MAX)

    def _watches(self) -> bool:
        """Whether to wait with the register's watch: unless the cluster
        answered that it has none less than _PROBE_EVERY seconds ago."""
        with self._lock:
            return time.monotonic() >= self._watch_from

    def _no_watch(self) -> None:
        """Record that the cluster has no watch (a release before it): poll
        until a rolling upgrade may have brought it."""
        log.info("raftmaster store: the cluster has no register watch (an earlier release); polling for keys instead")
        with self._lock:
            self._watch_from = time.monotonic() + _PROBE_EVERY

    def _round_prefix(self, round_: int) -> Optional[str]:
        """The register prefix of the keys that torch's agents write in a
        round, through its PrefixStore ("torch.rendezvous.<run id>.<round>"),
        or None when it does not fit a key."""
        prefix = self._prefix + quote("torch.rendezvous.%s.%d/" % (self._run_id, round_), safe=_KEY_SAFE)
        return prefix if len(prefix) <= _MAX_KEY else None

    def forget_round(self, round_: int) -> int:
        """Delete the keys of round round_ of the run, in one command, and
        return how many there were. Call it once a later round is complete:
        its participants all left round_ to join it. A name too long to be
        kept under the round's prefix (hashed, see store_key) stays until
        the run is forgotten. On a cluster below protocol level 5, or one
        that cannot be reached, it deletes nothing and logs why."""
        prefix = self._round_prefix(round_)
        if round_ < 0 or prefix is None:
            return 0
        try:
            if not self._native():
                return 0
            return self._client.kv_delete_prefix(prefix)
        except (errors.RaftmasterError, RuntimeError) as e:
            log.warning("raftmaster store: the keys of round %d of run %r stay in the register: %s", round_,
                        self._run_id, e)
            return 0

    def forget_run(self, round_: int, participants: int) -> bool:
        """Count this agent, a participant of the run's last round round_
        of participants, out of the run, once, after the run was closed;
        the last one out deletes every key of the run's store, in one
        command, and this returns True. The others may still be in the
        round's exit barrier, reading its keys, until they count themselves
        out. A participant that never does (it died) leaves the keys of
        that one round."""
        with self._lock:
            if self._exited:
                return False
            self._exited = True
        try:
            if not self._native():
                return False
            if self._client.kv_add(self._prefix + "%%exit/%d" % round_, 1) < participants:
                return False
            self._client.kv_delete_prefix(self._prefix)
            return True
        except (errors.RaftmasterError, RuntimeError) as e:
            log.warning("raftmaster store: the keys of run %r stay in the register: %s", self._run_id, e)
            return False


def _parts(items: List[Any]) -> List[List[Any]]:
    """items in parts of at most _MULTI_GET_KEYS, each one multi-get."""
    return [items[i:i + _MULTI_GET_KEYS] for i in range(0, len(items), _MULTI_GET_KEYS)]


class RaftmasterRendezvousHandler(DynamicRendezvousHandler):
    """torch's dynamic rendezvous handler (create_handler's, with every
    setting it reads), which keeps the run's keys in the register bounded,
    however many rounds an elastic job goes through:

    * once it has joined a round, each participant deletes the keys of the
      round before (:meth:`RaftmasterStore.forget_round`): every participant
      left that round to join this one, which is complete;
    * once the run is closed, each participant of its last round counts
      itself out as it shuts down, and the last one deletes every key of
      the run's store (:meth:`RaftmasterStore.forget_run`): the others may
      be in the round's exit barrier until then.

    So a run holds the keys of one or two rounds while it runs and, once
    closed, only its rendezvous state (closed, which keeps late agents
    out). ``raftmaster job delete`` of the job frees everything.

    It also closes the sessions of the agent's stopped workers, recorded in
    the directory it names to them in RAFTMASTER_SESSION_DIR, before each
    round and when it shuts down (see the module's doc).
    """

    _raftmaster_store: RaftmasterStore
    _raftmaster_sessions: Optional["WorkerSessions"] = None

    def next_rendezvous(self) -> Any:
        """See base class."""
        # The agent goes to a round once its workers have stopped (or
        # before it starts any): their sessions are over.
        if self._raftmaster_sessions is not None:
            self._raftmaster_sessions.close_all()
        try:
            result = super().next_rendezvous()
        finally:
            self._raftmaster_end_turn()
        state = self._raftmaster_state()
        if state is not None and getattr(state, "round", 0) > 0:
            self._raftmaster_store.forget_round(state.round - 1)
        return result

    def shutdown(self) -> bool:
        """See base class."""
        try:
            closed = super().shutdown()
        finally:
            self._raftmaster_end_turn()
        if self._raftmaster_sessions is not None:
            self._raftmaster_sessions.finish()
        state = self._raftmaster_state()
        node = getattr(self, "_this_node", None)
        if (closed and state is not None and getattr(state, "closed", False) and getattr(state, "complete", False)
                and node in getattr(state, "participants", {})):
            self._raftmaster_store.forget_run(state.round, len(state.participants))
        return closed

    def _keep_alive(self) -> None:
        """torch's heartbeat; its turn at writing the state ends with it, as
        the heartbeat may give up (its deadline) after a set_state lost."""
        try:
            super()._keep_alive()
        finally:
            self._raftmaster_end_turn()

    def _raftmaster_end_turn(self) -> None:
        """End the backend's turn at writing the state, if it holds one:
        torch may finish an operation on the state it was answered when a
        set_state lost (another agent made the change it wanted), without
        writing or reading again."""
        backend = getattr(getattr(self, "_state_holder", None), "_backend", None)
        if isinstance(backend, RaftmasterRendezvousBackend):
            backend.end_turn()

    def _raftmaster_state(self) -> Any:
        """The rendezvous state as this node last synced it, or None when
        this torch keeps it elsewhere (then the keys stay)."""
        return getattr(getattr(self, "_state_holder", None), "state", None)


# The agents' session directories of this process, in the order made, and
# what the environment named before the first.
_live_dirs: List["WorkerSessions"] = []
_outside_dir: Optional[str] = None
_dirs_lock = threading.Lock()


class WorkerSessions:
    """The sessions of an agent's workers: a directory of the agent's own,
    named to the workers (whose environment is the agent's) in
    RAFTMASTER_SESSION_DIR, where each of their clients records its open
    session; the agent closes them with its client once the workers have
    stopped."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.directory = tempfile.mkdtemp(prefix="raftmaster-sessions-")
        global _outside_dir
        with _dirs_lock:
            if not _live_dirs:
                _outside_dir = os.environ.get(SESSION_DIR_ENV)
            _live_dirs.append(self)
            os.environ[SESSION_DIR_ENV] = self.directory
        self._finished = False
        # torchrun does not shut the rendezvous down when the agent dies of
        # a signal; it still exits, once it has stopped its workers.
        atexit.register(self.finish)

    def close_all(self) -> List[int]:
        """Close every session recorded in the directory; return the ids of
        those that were open."""
        with self._lock:
            if self._finished:
                return []
            try:
                closed = close_recorded_sessions(self._client, self.directory)
            except errors.RaftmasterError as e:  # the agent's client was closed
                log.warning("raftmaster rendezvous: cannot close the workers' sessions: %s", e)
                return []
        if closed:
            log.info("raftmaster rendezvous: closed the sessions of stopped workers: %s",
                     ", ".join(str(i) for i in closed))
        return closed

    def finish(self) -> None:
        """Close the sessions left, remove the directory and stop naming it
        to new processes (once; the agent's workers have stopped)."""
        self.close_all()
        with self._lock:
            if self._finished:
                return
            self._finished = True
        with _dirs_lock:
            if self in _live_dirs:
                _live_dirs.remove(self)
            if os.environ.get(SESSION_DIR_ENV) == self.directory:
                # Name the directory of the agent made last that goes on,
                # else what the environment named before.
                name = _live_dirs[-1].directory if _live_dirs else _outside_dir
                if name is None:
                    os.environ.pop(SESSION_DIR_ENV, None)
                else:
                    os.environ[SESSION_DIR_ENV] = name
        shutil.rmtree(self.directory, ignore_errors=True)
        atexit.unregister(self.finish)


def _job(params: RendezvousParameters) -> str:
    job = params.get("job")
    if job is None or job == "":
        job = params.run_id
        if not _JOB_NAME.match(job):
            raise ValueError("raftmaster rendezvous: the run id %r is not a job name (1 to 63 characters of a-z, "
                             "0-9 and '-', starting and ending with a letter or digit); name the job with "
                             "--rdzv-conf job=NAME" % job)
    elif not _JOB_NAME.match(job):
        raise ValueError("raftmaster rendezvous: job %r is not a job name (1 to 63 characters of a-z, 0-9 and '-', "
                         "starting and ending with a letter or digit)" % job)
    return job


def _addresses(endpoint: str, tls: bool) -> List[str]:
    addrs = [a.strip() for a in (endpoint or "").split(",") if a.strip()]
    if not addrs:
        raise ValueError("raftmaster rendezvous: no endpoint: give the cluster's API addresses, "
                         "--rdzv-endpoint n1:8001,n2:8001,n3:8001")
    if tls:
        addrs = [a if "://" in a else "https://" + a for a in addrs]
    return addrs


def _token_file() -> Optional[str]:
    """The token in the file RAFTMASTER_TOKEN_FILE names (its first line),
    if any: a token in a file is on no command line and in no printed
    configuration."""
    path = os.environ.get("RAFTMASTER_TOKEN_FILE")
    if not path:
        return None
    try:
        with open(path) as f:
            return f.readline().strip() or None
    except OSError as e:
        raise ValueError("raftmaster rendezvous: RAFTMASTER_TOKEN_FILE %s: %s" % (path, e)) from e


def create_client(params: RendezvousParameters) -> Client:
    """The Client of the rendezvous described by params: its endpoint,
    job, token, tls_ca and read_timeout (see the module's doc)."""
    token = params.get("token") or os.environ.get("RAFTMASTER_TOKEN") or _token_file() or None
    ca = params.get("tls_ca") or os.environ.get("RAFTMASTER_TLS_CA") or None
    read_timeout = params.get_as_int("read_timeout", DEFAULT_READ_TIMEOUT)
    if read_timeout is None or read_timeout <= 0:
        raise ValueError("raftmaster rendezvous: read_timeout must be a positive number of seconds")
    context = None
    if ca:
        try:
            context = ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as e:
            raise ValueError("raftmaster rendezvous: tls_ca %s: %s" % (ca, e)) from e
    # The rendezvous attaches no key to a session (see the module's doc),
    # and a session that expired would fail its calls for nothing: the
    # agents' client opens none.
    return Client(_addresses(params.endpoint, context is not None), job=_job(params), token=token,
                  ssl_context=context, retry=read_timeout, session_ttl=0, session_dir="")


def create_backend(params: RendezvousParameters) -> Tuple[RaftmasterRendezvousBackend, RaftmasterStore]:
    """The backend and the agents' store of the rendezvous described by
    params, sharing one Client."""
    client = create_client(params)
    key = signing_key(client.job or "default", client._t.token)
    return RaftmasterRendezvousBackend(client, params.run_id, key), RaftmasterStore(client, params.run_id)


def create_rdzv_handler(params: RendezvousParameters) -> RaftmasterRendezvousHandler:
    """torchrun's dynamic rendezvous handler on the raftmaster backend, with
    its join_timeout, last_call_timeout and close_timeout, keeping the run's
    keys bounded (:class:`RaftmasterRendezvousHandler`)."""
    backend, store = create_backend(params)
    handler = create_handler(store, backend, params)
    # torch's create_handler reads every setting its release knows; the
    # handler it builds becomes ours, a subclass that adds only the store.
    handler.__class__ = RaftmasterRendezvousHandler
    assert isinstance(handler, RaftmasterRendezvousHandler)
    handler._raftmaster_store = store
    handler._raftmaster_sessions = WorkerSessions(store._client)
    return handler


def handler_creator() -> Callable[[RendezvousParameters], DynamicRendezvousHandler]:
    """Return the creator of the backend's handlers, :func:`create_rdzv_handler`.

    The package's ``torchrun.handlers`` entry point ``raftmaster`` names
    this function: torch calls it without arguments when its rendezvous
    package is imported, and registers what it returns under the entry
    point's name; torchrun then calls that with the RendezvousParameters of
    ``--rdzv-backend raftmaster``. :func:`register` registers the same
    creator, so that both may run in one process."""
    return create_rdzv_handler


def register() -> None:
    """Register the backend with torch's rendezvous handlers under
    ``raftmaster`` (again: nothing changes)."""
    try:
        handler_registry.register(BACKEND_NAME, create_rdzv_handler)
    except ValueError as e:  # registered by another creator
        raise RendezvousError("raftmaster rendezvous: %s" % e) from e
