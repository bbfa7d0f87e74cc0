#!/usr/bin/env python3
"""Simulated scale of the torchrun rendezvous on a raftmaster cluster.

N rendezvous agents, threads of this one process, each with a raftmaster
Client of its own and its own session (opened explicitly, kept alive by
the client), go through rounds of torch's dynamic rendezvous
(``DynamicRendezvousHandler.next_rendezvous``) on the real backend,
:class:`raftmaster.torch_rendezvous.RaftmasterRendezvousBackend`: each
reads the state with its get_state (a linearizable register read) and
changes it with its set_state (a compare-and-set of the one register key
that holds the signed, pickled state).

What runs is torch's own handler code: its join, keep-alive and complete
operations, its one-second polling while an agent waits for the round to
complete, its heartbeats every keep-alive interval (5 s), its initial
random delay of up to 0.3 s. One thing differs by default: the agents of
this process share the states they decode. A real agent unpickles every
state it reads; a thousand of them in one Python process, polling a state
of 77 KB once a second each, would spend the process's time unpickling
(about 1.4 ms each), not calling the cluster. So each version of the state
is unpickled once and shared read-only, and an agent that changes the
state first takes a copy of its own (torch's state holder, with that
cache: :class:`SharedStateHolder`). What reaches the cluster is unchanged:
every agent makes every call a real agent makes, signed and checked.
``--torch-holder`` runs torch's own state holder instead (for a few
hundred agents at most).

An agent whose set_state loses takes a turn in the run's queue of
writers, as every agent of the backend does (``--no-turns`` backs off at
random instead, as the backend did before it had the queue); each round
reports the turns taken, and how many of them were taken because the
queue stalled (a turn held by an agent that did not come back).

Each measured round is a new rendezvous (a run id of its own) of exactly N
nodes (min = max = N), which the N-th joiner completes. The time of a round
runs from the moment the agents start to join to the last agent's
completion. Then, unless ``--wait 0``, a rendezvous of N+1 nodes holds the
N agents waiting, as the first N agents of a round wait for the last one:
once all N have joined, the leader's API requests are counted over
``--wait`` seconds (from its /metrics), and a last agent completes the
round. That is the leader's load while a large rendezvous waits.

Run it against a cluster (``make bench-rdzv`` starts one)::

    python3 python/bench/rendezvous_agents.py --addrs 127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003 \\
        --agents 1000 --rounds 3

The state is signed under the run's secret (``--secret``, else
RAFTMASTER_RDZV_SECRET, else a random one for this run: every agent is in
this process).
"""

from __future__ import annotations

import argparse
import collections
import copy
import datetime
import http.client
import json
import os
import pickle
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from raftmaster import SESSION_PROTOCOL, Client, _transport, errors  # noqa: E402
from raftmaster.torch_rendezvous import (RaftmasterRendezvousBackend, RaftmasterRendezvousHandler,  # noqa: E402
                                         RaftmasterStore, SECRET_ENV,
                                         signing_key, state_key, store_prefix)
from torch.distributed.elastic.rendezvous import dynamic_rendezvous  # noqa: E402
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (  # noqa: E402
    DynamicRendezvousHandler, RendezvousSettings, RendezvousTimeout, _BackendRendezvousStateHolder,
    _DistributedRendezvousOpExecutor, _NodeDesc, _RendezvousState)

# How long the interpreter lets a thread run before another that waits
# takes over, in seconds (sys.setswitchinterval).
SWITCH_INTERVAL = 0.05
# How long an attempt of an agent's client waits before it asks the nodes
# who leads, in seconds (a client's is _transport.LEADER_PROBE_AFTER).
LEADER_PROBE_AFTER = 5.0

# The request counter of the leader's /metrics (docs/metrics.md).
_COUNTER = re.compile(r'^raftmaster_http_request_duration_seconds_count\{(.*)\} (\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _method_name(depth: int = 2) -> str:
    """torch's get_method_name without the source files: the name of the
    function depth frames up."""
    try:
        return sys._getframe(depth).f_code.co_name
    except ValueError:
        return "no_method_name"


class Decoded:
    """The states the agents of this process decoded, by register key and
    version: each version is unpickled once and shared, read-only."""

    def __init__(self, size: int = 16) -> None:
        self._lock = threading.Lock()
        self._states: "collections.OrderedDict[Tuple[str, Any], Tuple[_RendezvousState, datetime.datetime]]" = \
            collections.OrderedDict()
        self._size = size
        self.decodes = 0

    def get(self, key: str, bits: bytes, token: Any) -> Tuple[_RendezvousState, datetime.datetime]:
        """The state bits decode to, and its oldest heartbeat."""
        hit = self._states.get((key, token))  # one dict read, atomic: no lock for the common case
        if hit is not None:
            return hit
        state = pickle.loads(bits)
        oldest = min(state.last_heartbeats.values(), default=datetime.datetime.max)
        with self._lock:
            self.decodes += 1
            self._states[(key, token)] = (state, oldest)
            while len(self._states) > self._size:
                self._states.popitem(last=False)
        return state, oldest


def own_copy(state: _RendezvousState) -> _RendezvousState:
    """A copy of state that an agent may change: its containers copied (the
    participants, the wait list, the heartbeats, whatever this torch has),
    their contents shared, being immutable (node descriptions, datetimes,
    integers). It is what unpickling the state's bits again would give, at
    a fiftieth of the cost: a state of a thousand nodes unpickles in 2.4 ms."""
    out = copy.copy(state)
    for name, value in vars(state).items():
        if isinstance(value, (dict, set, list)):
            setattr(out, name, type(value)(value))
    return out


class SharedStateHolder(_BackendRendezvousStateHolder):
    """torch's state holder, syncing through the same backend calls, whose
    states are shared with the other agents of the process (Decoded): the
    state it holds is read-only until :meth:`own` copies it for a change."""

    def __init__(self, backend: RaftmasterRendezvousBackend, settings: RendezvousSettings,
                 decoded: Decoded) -> None:
        super().__init__(backend, settings)
        self._key = backend.key
        self._decoded = decoded
        self._bits: Optional[bytes] = None
        self._own = True  # a fresh state is this holder's

    def own(self) -> _RendezvousState:
        """The state, as a copy of this agent's own to change."""
        if not self._own:
            self._state = own_copy(self._state) if self._bits is not None else _RendezvousState()
            self._own = True
        return self._state

    def sync(self) -> Optional[bool]:
        """torch's sync (_BackendRendezvousStateHolder.sync), decoding
        through the shared states."""
        bits: Optional[bytes] = None
        token = None
        has_set: Optional[bool]
        if self._dirty:
            has_set = False
            set_response = self._backend.set_state(pickle.dumps(self._state), self._token)
            if set_response is not None:
                bits, token, has_set = set_response
        else:
            has_set = None
            if self._cache_duration > 0 and self._last_sync_time >= max(time.monotonic() - self._cache_duration, 0):
                return None
            get_response = self._backend.get_state()
            if get_response is not None:
                bits, token = get_response
        self._bits = bits
        if bits is not None:
            self._state, oldest = self._decoded.get(self._key, bits, token)
            self._own = False
        else:
            self._state, oldest = _RendezvousState(), datetime.datetime.max
            self._own = True
        self._token = token
        self._dirty = False
        self._last_sync_time = time.monotonic()
        expire = datetime.datetime.utcnow() - (self._settings.keep_alive_interval *
                                               self._settings.keep_alive_max_attempt)
        if oldest < expire:
            # torch drops the nodes without a heartbeat: a change.
            self.own()
            self._sanitize()
        else:
            self._dead_nodes = []
        return has_set


class SharedStateExecutor(_DistributedRendezvousOpExecutor):
    """torch's operation executor, which takes a copy of the state of its
    own (SharedStateHolder.own) before each change it makes."""

    _state_holder: SharedStateHolder

    def _owned(self) -> None:
        self._state = self._state_holder.own()

    def _keep_alive(self) -> None:
        self._owned()
        super()._keep_alive()

    def _add_to_participants(self) -> None:
        self._owned()
        super()._add_to_participants()

    def _add_to_wait_list(self) -> None:
        self._owned()
        super()._add_to_wait_list()

    def _remove_from_participants(self) -> None:
        self._owned()
        super()._remove_from_participants()

    def _remove_from_wait_list(self) -> None:
        self._owned()
        super()._remove_from_wait_list()

    def _mark_rendezvous_complete(self) -> None:
        self._owned()
        super()._mark_rendezvous_complete()

    def _mark_rendezvous_closed(self) -> None:
        self._owned()
        super()._mark_rendezvous_closed()


class Counts:
    """The backend calls of the agents."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.gets = 0
        self.sets_won = 0
        self.sets_lost = 0
        self.turns = 0  # turns taken in the queue of writers
        self.stalls = 0  # of them, taken because the queue stalled

    def snapshot(self) -> Tuple[int, int, int, int, int]:
        with self._lock:
            return self.gets, self.sets_won, self.sets_lost, self.turns, self.stalls

    def add(self, gets: int = 0, won: int = 0, lost: int = 0, turns: int = 0, stalls: int = 0) -> None:
        with self._lock:
            self.gets += gets
            self.sets_won += won
            self.sets_lost += lost
            self.turns += turns
            self.stalls += stalls


class CountedBackend(RaftmasterRendezvousBackend):
    """The real backend, counting its calls."""

    def __init__(self, client: Client, run_id: str, key: bytes, counts: Counts) -> None:
        super().__init__(client, run_id, key)
        self._counts = counts

    def get_state(self):
        self._counts.add(gets=1)
        return super().get_state()

    def set_state(self, state, token=None):
        r = super().set_state(state, token)
        if r is not None and r[2]:
            self._counts.add(won=1)
        else:
            self._counts.add(lost=1)
        return r

    def _take_turn(self):
        stalled = self.queue.stalled if self.queue is not None else 0
        queue = super()._take_turn()
        if queue is not None:
            self._counts.add(turns=1, stalls=queue.stalled - stalled)
        return queue


class Agent:
    """One simulated rendezvous agent: its client and session."""

    def __init__(self, index: int, args: argparse.Namespace, key: bytes) -> None:
        self.index = index
        self.key = key
        self.args = args
        self.client = Client(args.addrs, job=args.job, token=args.token, retry=args.retry,
                             session_ttl=args.session_ttl, session_dir="")
        self.session: Optional[int] = None
        self.handler: Optional[DynamicRendezvousHandler] = None

    def open(self) -> None:
        self.session = self.client.open_session()

    def new_handler(self, run_id: str, nodes: int, decoded: Optional[Decoded], counts: Counts) -> None:
        """torch's handler of rendezvous run_id of nodes nodes, on the real backend."""
        backend = CountedBackend(self.client, run_id, self.key, counts)
        settings = RendezvousSettings(run_id, nodes, nodes,
                                      RendezvousTimeout(join=datetime.timedelta(seconds=self.args.join_timeout)),
                                      keep_alive_interval=datetime.timedelta(seconds=self.args.keep_alive_interval),
                                      keep_alive_max_attempt=self.args.keep_alive_max_attempt)
        # A node of its own, as each agent of a job runs on a host of its own.
        node = _NodeDesc("agent-%05d.bench" % self.index, os.getpid(), self.index)
        holder = (_BackendRendezvousStateHolder(backend, settings) if decoded is None
                  else SharedStateHolder(backend, settings, decoded))
        store = RaftmasterStore(self.client, run_id)
        h = DynamicRendezvousHandler(node, settings, backend.name, store, holder)
        # The backend's handler, as create_rdzv_handler makes it (without
        # the workers' sessions: the agents have no workers).
        h.__class__ = RaftmasterRendezvousHandler
        h._raftmaster_store = store
        if decoded is not None:
            h._op_executor = SharedStateExecutor(node, holder, settings)
        self.handler = h

    def stop_heartbeats(self) -> None:
        if self.handler is not None:
            self.handler._stop_heartbeats()

    def close(self) -> None:
        self.stop_heartbeats()
        self.client.close()


class Outcome:
    """What next_rendezvous gave one agent."""

    def __init__(self) -> None:
        self.done = 0.0
        self.rank = -1
        self.world = 0
        self.round = -1
        self.error = ""


def join_all(agents: List[Agent], run_id: str, nodes: int, decoded: Optional[Decoded], counts: Counts,
             joined=None) -> Tuple[float, List[Outcome]]:
    """Have every agent go through next_rendezvous of run_id (nodes
    nodes) at once; return when they started and their outcomes."""
    for a in agents:
        a.new_handler(run_id, nodes, decoded, counts)
    go = threading.Event()
    outcomes = [Outcome() for _ in agents]

    def run(a: Agent, o: Outcome) -> None:
        go.wait()
        try:
            assert a.handler is not None
            _, o.rank, o.world = a.handler.next_rendezvous()
            o.round = a.handler._state_holder.state.round
        except Exception as e:  # reported, and the bench fails
            o.error = "%s: %s" % (type(e).__name__, e)
        o.done = time.monotonic()

    threads = [threading.Thread(target=run, args=(a, o), name="agent-%d" % a.index, daemon=True)
               for a, o in zip(agents, outcomes)]
    for t in threads:
        t.start()
    start = time.monotonic()
    go.set()
    if joined is not None:
        joined(start)
    for t in threads:
        t.join()
    return start, outcomes


class Threads:
    """Agents that are threads of this process."""

    def __init__(self, agents: List[Agent], decoded: Optional[Decoded], counts: Counts) -> None:
        self.agents = agents
        self.decoded = decoded
        self.counts = counts

    @property
    def sessions(self) -> List[Optional[int]]:
        return [a.session for a in self.agents]

    def join(self, run_id: str, nodes: int, joined=None) -> Tuple[float, List[Outcome], Tuple[int, ...]]:
        """join_all of every agent; with the backend calls they made."""
        c0 = self.counts.snapshot()
        start, outcomes = join_all(self.agents, run_id, nodes, self.decoded, self.counts, joined)
        c1 = self.counts.snapshot()
        return start, outcomes, tuple(after - before for before, after in zip(c0, c1))  # type: ignore[return-value]

    def stop_heartbeats(self) -> None:
        for a in self.agents:
            a.stop_heartbeats()

    def close(self) -> None:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(Agent.close, self.agents))


class Children:
    """Agents that are threads of child processes of this one, each
    running this script with --child for a range of the agents' indexes.
    The parent sends each command as a line of JSON on a child's stdin and
    reads the answer from its stdout; the clocks are comparable, since
    time.monotonic is the system's."""

    def __init__(self, args: argparse.Namespace, argv: List[str], secret: str) -> None:
        n, p = args.agents, args.processes
        bounds = [n * i // p for i in range(p + 1)]
        env = dict(os.environ)
        env[SECRET_ENV] = secret  # in the environment, not on a command line
        self.procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv +
                                       ["--child", "%d:%d" % (bounds[i], bounds[i + 1])],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
                      for i in range(p)]
        self.sessions: List[Optional[int]] = []
        for out in self._answers():
            self.sessions += out["sessions"]

    def _send(self, cmd: Dict[str, Any]) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(cmd) + "\n")
            proc.stdin.flush()

    def _answers(self) -> List[Dict[str, Any]]:
        out = []
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("an agents' process exited (%s)" % proc.wait())
            out.append(json.loads(line))
        return out

    def join(self, run_id: str, nodes: int, joined=None) -> Tuple[float, List[Outcome], Tuple[int, ...]]:
        self._send({"op": "join", "run": run_id, "nodes": nodes})
        if joined is not None:
            joined(time.monotonic())
        answers = self._answers()
        outcomes = []
        for a in answers:
            for d in a["outcomes"]:
                o = Outcome()
                o.__dict__.update(d)
                outcomes.append(o)
        counts = tuple(sum(a["counts"][i] for a in answers) for i in range(len(answers[0]["counts"])))
        return min(a["start"] for a in answers), outcomes, counts  # type: ignore[return-value]

    def stop_heartbeats(self) -> None:
        self._send({"op": "stop"})
        self._answers()

    def close(self) -> None:
        self._send({"op": "close"})
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def child_main(args: argparse.Namespace) -> int:
    """An agents' process of Children: open the sessions of the agents of
    args.child, then run the parent's commands."""
    first, end = (int(x) for x in args.child.split(":"))
    key = signing_key(args.job, args.token, args.secret)
    group = Threads([Agent(i, args, key) for i in range(first, end)], None if args.torch_holder else Decoded(),
                    Counts())
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(Agent.open, group.agents))

    def answer(out: Dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()

    answer({"sessions": group.sessions})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "join":
            start, outcomes, counts = group.join(cmd["run"], cmd["nodes"])
            answer({"start": start, "outcomes": [vars(o) for o in outcomes], "counts": counts})
        elif cmd["op"] == "stop":
            group.stop_heartbeats()
            answer({})
        else:
            break
    group.close()
    return 0


def wait_for_sessions(args: argparse.Namespace, timeout: float = 60.0) -> None:
    """Wait until the cluster has sessions: a cluster just started raises
    its protocol level to SESSION_PROTOCOL once its nodes have all said
    they can, and a client that opens a session before works without one."""
    deadline = time.monotonic() + timeout
    with Client(args.addrs, job=args.job, token=args.token, session_ttl=0) as c:
        while True:
            level = c.protocol()
            if level >= SESSION_PROTOCOL:
                return
            if time.monotonic() > deadline:
                raise SystemExit("the cluster is at protocol level %d after %.0fs, below %d: it has no sessions"
                                 % (level, timeout, SESSION_PROTOCOL))
            time.sleep(0.2)


def leader_api(addrs: List[str], token: Optional[str]) -> str:
    """The API address of the cluster's leader."""
    for _ in range(100):
        for a in addrs:
            status = _get_json(a, "/v1/status", token)
            leader = ((status or {}).get("leader") or {}).get("api_addr")
            if leader:
                return leader
        time.sleep(0.1)
    raise SystemExit("no leader among %s" % ", ".join(addrs))


def _get(addr: str, path: str, token: Optional[str]) -> bytes:
    host = addr.split("://", 1)[-1].rstrip("/")
    conn = http.client.HTTPConnection(host, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise OSError("GET %s%s: %d" % (addr, path, resp.status))
        return body
    finally:
        conn.close()


def _get_json(addr: str, path: str, token: Optional[str]) -> Any:
    try:
        return json.loads(_get(addr, path, token))
    except (OSError, ValueError, http.client.HTTPException):
        return None


def requests_by_route(addr: str, token: Optional[str]) -> Dict[str, float]:
    """The API requests the node at addr has answered, by route (its
    raftmaster_http_request_duration_seconds_count, summed over codes)."""
    out: Dict[str, float] = collections.defaultdict(float)
    for line in _get(addr, "/metrics", token).decode().splitlines():
        m = _COUNTER.match(line)
        if m:
            labels = dict(_LABEL.findall(m.group(1)))
            out[labels.get("route", "?")] += float(m.group(2))
    return out


def _short(route: str) -> str:
    return route.replace("/v1/jobs/{job}", "").replace("/v1/", "")


def rates(before: Dict[str, float], after: Dict[str, float], seconds: float) -> Tuple[float, Dict[str, float]]:
    by = {r: (after.get(r, 0) - before.get(r, 0)) / seconds for r in after}
    by = {r: v for r, v in by.items() if v > 0}
    return sum(by.values()), by


def _fmt_routes(by: Dict[str, float]) -> str:
    top = sorted(by.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join("%s %.0f" % (_short(r), v) for r, v in top)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Simulated scale of the torchrun rendezvous: N agents (threads of this process, each with "
                    "its own client and session) run torch's DynamicRendezvousHandler on the raftmaster backend; "
                    "reports the time of a round, the join rate and the leader's requests a second while the "
                    "agents wait.",
        epilog="See the module's doc for what is simulated; make bench-rdzv starts a local cluster and runs it.")
    p.add_argument("--agents", type=int, default=1000, help="rendezvous agents, each a thread (default 1000)")
    p.add_argument("--addrs", default="127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003",
                   help="the cluster's API addresses, comma separated")
    p.add_argument("--job", default="rdzv-bench", help="the job whose register holds the rendezvous")
    p.add_argument("--rounds", type=int, default=3, help="measured rounds, each a new rendezvous (default 3)")
    p.add_argument("--wait", type=float, default=10.0,
                   help="seconds to count the leader's requests while the N agents wait for an N+1-th "
                        "(0: skip that phase; default 10)")
    p.add_argument("--session-ttl", type=float, default=30.0,
                   help="TTL of each agent's session, in seconds (keep-alives every third of it; default 30)")
    p.add_argument("--keep-alive-interval", type=float, default=5.0,
                   help="torch's keep_alive_interval: each agent writes its heartbeat into the state this often, "
                        "in seconds (default 5, torch's; later releases take it from --rdzv-conf)")
    p.add_argument("--keep-alive-max-attempt", type=int, default=3,
                   help="torch's keep_alive_max_attempt: heartbeats missed before a node is dropped (default 3)")
    p.add_argument("--cas-backoff-max", type=float, default=RaftmasterRendezvousBackend.cas_backoff_max,
                   help="the backend's longest pause after lost compare-and-sets, in seconds (default %g)"
                        % RaftmasterRendezvousBackend.cas_backoff_max)
    p.add_argument("--no-turns", action="store_true",
                   help="a set_state that loses backs off and tries again, rather than taking a turn in the "
                        "queue of writers (the backend's turns = False)")
    p.add_argument("--join-timeout", type=float, default=600.0, help="torch's join timeout, in seconds")
    p.add_argument("--retry", type=float, default=60.0, help="each client's retry budget, in seconds")
    p.add_argument("--token", default=os.environ.get("RAFTMASTER_TOKEN") or None,
                   help="bearer token of a cluster with --auth-tokens (default $RAFTMASTER_TOKEN)")
    p.add_argument("--secret", default=os.environ.get(SECRET_ENV) or None,
                   help="the secret that signs the state (default $%s, else a random one)" % SECRET_ENV)
    p.add_argument("--torch-holder", action="store_true",
                   help="each agent unpickles every state it reads, with torch's own state holder, rather than "
                        "sharing the decoded states (a few hundred agents at most)")
    p.add_argument("--processes", type=int, default=1,
                   help="spread the agents over this many processes, each a share of the threads (default 1). "
                        "One CPython process runs one agent's Python at a time: past a few hundred agents its "
                        "interpreter, not the cluster, sets the pace")
    p.add_argument("--child", metavar="FIRST:END", help=argparse.SUPPRESS)
    p.add_argument("--json", metavar="FILE", help="also write the figures and every agent's outcome to FILE")
    args = p.parse_args(argv)
    args.addrs = [a.strip() for a in args.addrs.split(",") if a.strip()]
    if args.agents < 1 or args.rounds < 0 or args.wait < 0 or not 1 <= args.processes <= args.agents:
        p.error("--agents must be at least 1, --rounds and --wait not negative, --processes from 1 to --agents")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    # A thousand threads of one process take turns at the interpreter: each
    # waiter would ask the running one to let go every 5 ms (the default),
    # a storm of wake-ups that leaves no time for the agents' work.
    sys.setswitchinterval(SWITCH_INTERVAL)
    # An attempt of an agent here waits for the interpreter, not for the
    # leader: probing the nodes for a new leader after 0.3 s, as a client
    # does, would only add threads and requests.
    _transport.LEADER_PROBE_AFTER = LEADER_PROBE_AFTER
    # torch names the method of each event it records from inspect.stack(),
    # which reads the source files of every frame: a millisecond or more per
    # event, for one agent; the frame itself says the same.
    dynamic_rendezvous.get_method_name = _method_name
    threading.stack_size(512 << 10)
    RaftmasterRendezvousBackend.cas_backoff_max = args.cas_backoff_max
    RaftmasterRendezvousBackend.turns = not args.no_turns
    if args.child:
        return child_main(args)
    n = args.agents
    args.secret = args.secret or secrets.token_hex(16)
    key = signing_key(args.job, args.token, args.secret)
    tag = "bench-" + uuid.uuid4().hex[:8]
    decoded = None if args.torch_holder else Decoded()
    report: Dict[str, Any] = {"agents": n, "processes": args.processes, "rounds": [], "wait": None}

    print("%d agents in %d process%s, job %s, runs %s-*, %s state holder; opening their sessions"
          % (n, args.processes, "" if args.processes == 1 else "es", args.job, tag,
             "torch's" if args.torch_holder else "a shared"))
    wait_for_sessions(args)
    t = time.monotonic()
    last = Agent(n, args, key)  # the N+1-th of the wait phase, in this process
    group: Any
    if args.processes > 1:
        group = Children(args, argv, args.secret)
    else:
        group = Threads([Agent(i, args, key) for i in range(n)], decoded, Counts())
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(Agent.open, group.agents))
    last.open()
    sessions = set(group.sessions) | {last.session}
    print("  %d sessions open in %.1fs" % (len(sessions - {None}), time.monotonic() - t))
    if len(sessions - {None}) != n + 1:
        group.close()
        last.close()
        raise SystemExit("%d of the %d agents have no session of their own" % (n + 1 - len(sessions - {None}), n + 1))
    report["sessions"] = group.sessions
    leader = leader_api(args.addrs, args.token)
    failed = False
    try:
        times = []
        for r in range(args.rounds):
            before, m0 = requests_by_route(leader, args.token), time.monotonic()
            start, outcomes, (gets, won, lost, turns, stalls) = group.join("%s-%d" % (tag, r), n)
            end = max(o.done for o in outcomes)
            took = end - start
            total, by = rates(before, requests_by_route(leader, args.token), time.monotonic() - m0)
            errs = [o.error for o in outcomes if o.error]
            ranks = sorted(o.rank for o in outcomes if not o.error)
            ok = not errs and ranks == list(range(n)) and len({o.round for o in outcomes}) == 1
            failed = failed or not ok
            times.append(took)
            report["rounds"].append({
                "seconds": took, "leader_requests_per_second": total, "by_route": by,
                "gets": gets, "sets_won": won, "sets_lost": lost, "turns": turns, "turns_stalled": stalls,
                "errors": errs[:10], "agents": [{"rank": o.rank, "world": o.world, "round": o.round,
                                                 "seconds": o.done - start, "error": o.error} for o in outcomes]})
            print("round %d: %d agents complete in %.2fs (%.0f joins/s); leader %.0f req/s (%s); "
                  "state reads %d, compare-and-sets won %d, lost %d; turns %d (%d after a stall)%s"
                  % (r, n - len(errs), took, n / took, total, _fmt_routes(by), gets, won, lost, turns, stalls,
                     "" if ok else "; FAILED: %s" % (errs[:3] or "ranks or rounds differ")))
            group.stop_heartbeats()
        if times:
            report["round_p50"], report["round_max"] = statistics.median(times), max(times)
            print("time for a round of %d agents: p50 %.2fs, max %.2fs over %d rounds; join rate %.0f agents/s"
                  % (n, report["round_p50"], report["round_max"], len(times), n / report["round_p50"]))
        if args.wait > 0:
            failed = wait_phase(group, last, args, tag, decoded, leader, report) or failed
    finally:
        group.close()
        last.close()
        try:
            with Client(args.addrs, job=args.job, token=args.token, session_ttl=0) as c:
                for r in range(args.rounds + 1):
                    c.kv_delete(state_key("%s-%d" % (tag, r)))
                    c.kv_delete_prefix(store_prefix("%s-%d" % (tag, r)))
        except errors.RaftmasterError as e:
            print("cannot delete the bench's states: %s" % e)
    report["failed"] = failed
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failed else 0


def _route_rate(by: Dict[str, float], part: str) -> float:
    return sum(v for r, v in by.items() if part in r)


def wait_phase(group: Any, last: Agent, args: argparse.Namespace, tag: str, decoded: Optional[Decoded],
               leader: str, report: Dict[str, Any]) -> bool:
    """N agents join a rendezvous of N+1 and wait; count the leader's
    requests over args.wait seconds once all have joined; then the last
    agent joins and completes the round. Return whether it failed."""
    n = args.agents
    run_id = "%s-%d" % (tag, args.rounds)
    watcher = RaftmasterRendezvousBackend(last.client, run_id, last.key)
    figures: Dict[str, Any] = {}

    def hold(start: float) -> None:
        # Wait for the N agents to be participants, reading the state as
        # an agent does, every second.
        while True:
            cur = watcher.get_state()
            if cur is not None and len(pickle.loads(cur[0]).participants) >= n:
                break
            time.sleep(1)
        figures["all_joined_after"] = time.monotonic() - start
        before, t0 = requests_by_route(leader, args.token), time.monotonic()
        time.sleep(args.wait)
        after, t1 = requests_by_route(leader, args.token), time.monotonic()
        total, by = rates(before, after, t1 - t0)
        figures["leader_requests_per_second"], figures["by_route"] = total, by
        figures["gets_per_second"] = _route_rate(by, "kv/get")
        figures["sets_per_second"] = _route_rate(by, "kv/cas")
        threading.Thread(target=join_last, daemon=True).start()

    last_outcome = Outcome()

    def join_last() -> None:
        try:
            assert last.handler is not None
            _, last_outcome.rank, last_outcome.world = last.handler.next_rendezvous()
        except Exception as e:
            last_outcome.error = "%s: %s" % (type(e).__name__, e)

    last.new_handler(run_id, n + 1, decoded, Counts())
    _, outcomes, _ = group.join(run_id, n + 1, joined=lambda s: threading.Thread(
        target=hold, args=(s,), daemon=True).start())
    errs = [o.error for o in outcomes if o.error] + ([last_outcome.error] if last_outcome.error else [])
    ranks = sorted([o.rank for o in outcomes] + [last_outcome.rank])
    ok = not errs and ranks == list(range(n + 1))
    figures["errors"] = errs[:10]
    report["wait"] = figures
    if "leader_requests_per_second" in figures:
        print("waiting: %d agents joined in %.1fs; over %.0fs waiting, the leader answered %.0f req/s (%s); "
              "the agents read the state %.0f times a second, wrote it %.0f%s"
              % (n, figures["all_joined_after"], args.wait, figures["leader_requests_per_second"],
                 _fmt_routes(figures["by_route"]), figures["gets_per_second"], figures["sets_per_second"],
                 "" if ok else "; FAILED: %s" % (errs[:3] or "ranks differ")))
    group.stop_heartbeats()
    last.stop_heartbeats()
    return not ok


if __name__ == "__main__":
    sys.exit(main())
