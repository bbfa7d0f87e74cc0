"""The queue of writers of a rendezvous state (raftmaster._turns), through
the real backend on a real cluster: writers that lose a set_state take
turns, each then winning at once; a forgotten turn holds nobody up for
long; the queue leaves a bounded number of keys; and a backend without
turns makes none."""

import threading
import time
import uuid

import pytest

import raftmaster
from raftmaster import _turns

pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")
from raftmaster import torch_rendezvous as tr  # noqa: E402

SECRET = b"secret-of-the-turns-test"


def backend(cluster, job, run_id, **attrs):
    client = raftmaster.Client(cluster.addrs, job=job, retry=30, session_ttl=0)
    b = tr.RaftmasterRendezvousBackend(client, run_id, SECRET)
    for k, v in attrs.items():
        setattr(b, k, v)
    return b


def join(b, name, attempts):
    """What torch's join does with a backend: read the state, add oneself,
    set it with the token read, and again with the state a lost set_state
    answers, until one wins. Counts the set_states."""
    got = b.get_state()
    names, token = (got[0].split(b",") if got else []), (got[1] if got else None)
    while True:
        attempts.append(name)
        r = b.set_state(b",".join(names + [name]), token)
        if r is not None and r[2]:
            return
        names, token = (r[0].split(b",") if r else []), (r[1] if r else None)


def turn_keys(cluster, job, run_id):
    with raftmaster.Client(cluster.addrs, job=job, retry=30, session_ttl=0) as c:
        return c.kv_num_keys(tr.store_prefix(run_id) + "%turn/")


def a_writer_ahead(cluster, job, n=3):
    """n backends of a new run, the first of which wrote the state twice:
    the token of its first write, t1, is stale. Returns them and t1."""
    run_id = "turns-" + uuid.uuid4().hex[:8]
    backends = [backend(cluster, job, run_id) for _ in range(n)]
    _, t1, _ = backends[0].set_state(b"a")
    backends[0].set_state(b"b", t1)
    return backends, t1


def test_writers_that_lose_take_turns_and_then_win(store_cluster, job):
    run_id = "turns-" + uuid.uuid4().hex[:8]
    n = 8
    backends = [backend(store_cluster, job, run_id) for _ in range(n)]
    attempts = []
    go = threading.Barrier(n)

    def run(i):
        go.wait()
        join(backends[i], b"w%d" % i, attempts)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    state, _ = backends[0].get_state()
    assert sorted(state.split(b",")) == sorted(b"w%d" % i for i in range(n))
    # Each writer tries once on its own; one that loses waits for its
    # turn and tries again on the state then, which only a first try of
    # another writer can beat. Racing without turns, a writer loses to
    # every other that wins before it: n*(n+1)/2 tries.
    assert len(attempts) <= 3 * n, attempts
    assert sum(b.queue.taken for b in backends) >= 1
    assert sum(b.queue.stalled for b in backends) == 0
    # Each turn ended when its set_state won: the queue holds its counter,
    # the last turn served and that turn's end, however many turns.
    assert not any(b.queue.held() for b in backends)
    assert turn_keys(store_cluster, job, run_id) <= 3
    for b in backends:
        b._client.close()


def test_a_turn_forgotten_holds_the_next_writer_up_only_for_a_while(store_cluster, job):
    (first, forgetful, next_), t1 = a_writer_ahead(store_cluster, job)
    # A stale set_state takes a turn, and its holder never comes back.
    assert forgetful.set_state(b"late", t1)[2] is False
    assert forgetful.queue.held()
    next_.queue.stall, next_.queue.poll = 0.5, 0.2
    state, token, has_set = next_.set_state(b"later", t1)
    assert (state, has_set) == (b"b", False)
    assert next_.queue.held() and next_.queue.stalled == 1
    assert next_.set_state(b"c", token)[2] is True
    assert not next_.queue.held()
    # The forgetful writer's turn ends when it reads.
    forgetful.get_state()
    assert not forgetful.queue.held()
    for b in (first, forgetful, next_):
        b._client.close()


def test_a_turn_left_unused_is_ended_for_its_holder(store_cluster, job):
    (first, idle, next_), t1 = a_writer_ahead(store_cluster, job)
    idle.queue.hold_for = 0.2
    # A set_state lost takes a turn, and its caller gives up (as torch's
    # heartbeat does past its deadline): neither writes nor reads again.
    assert idle.set_state(b"late", t1)[2] is False
    deadline = time.monotonic() + 60
    while idle.queue.held() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not idle.queue.held() and idle.queue.expired == 1
    # The next writer that loses goes on at once: no stall.
    next_.queue.stall = 600.0
    state, token, has_set = next_.set_state(b"later", t1)
    assert (state, has_set) == (b"b", False) and next_.queue.stalled == 0
    assert next_.set_state(b"c", token)[2] is True
    for b in (first, idle, next_):
        b._client.close()


def test_a_read_ends_the_turn(store_cluster, job):
    run_id = "turns-" + uuid.uuid4().hex[:8]
    a, b = backend(store_cluster, job, run_id), backend(store_cluster, job, run_id)
    _, t1, _ = a.set_state(b"one")
    _, t2, _ = a.set_state(b"two", t1)
    assert b.set_state(b"stale", t1) == (b"two", t2, False) and b.queue.held()
    # torch reads instead of writing again: the turn ends, and the next
    # writer that loses goes on without waiting for the queue to stall.
    assert b.get_state() == (b"two", t2) and not b.queue.held()
    a.queue.stall = 600.0
    assert a.set_state(b"stale", t1) == (b"two", t2, False)
    assert a.queue.held() and a.queue.stalled == 0
    a.end_turn()
    assert not a.queue.held()
    for x in (a, b):
        x._client.close()


def test_a_backend_without_turns_backs_off_and_makes_no_keys(store_cluster, job):
    run_id = "turns-" + uuid.uuid4().hex[:8]
    a = backend(store_cluster, job, run_id, turns=False, cas_backoff_min=0.001, cas_backoff_max=0.01)
    _, t1, _ = a.set_state(b"one")
    a.set_state(b"two", t1)
    assert a.set_state(b"stale", t1)[2] is False
    assert not a.queue.held() and a.queue.taken == 0
    assert turn_keys(store_cluster, job, run_id) == 0
    a._client.close()


def test_the_queue_alone(store_cluster, job):
    prefix = "turns-alone-%s/" % uuid.uuid4().hex[:8]
    clients = [raftmaster.Client(store_cluster.addrs, job=job, retry=30, session_ttl=0) for _ in range(3)]
    qs = [_turns.WriterQueue(c, prefix, stall=600.0) for c in clients]
    assert qs[0].take() is True and qs[0].ticket == 1
    order = []

    def wait_turn(i):
        qs[i].take()
        order.append(i)

    second = threading.Thread(target=wait_turn, args=(1,))
    second.start()
    # The second waits on the first's turn; the first ends it.
    with raftmaster.Client(store_cluster.addrs, job=job, retry=30, session_ttl=0) as c:
        v = c.kv_get(prefix + "next")
        while v.value != b"2":  # until the second has its ticket
            v = c.kv_watch(prefix + "next", v.version, timeout=30)
    assert second.is_alive()
    qs[0].release()
    second.join(60)
    assert order == [1] and qs[1].ticket == 2 and qs[1].stalled == 0
    qs[1].release()
    with raftmaster.Client(store_cluster.addrs, job=job, retry=30, session_ttl=0) as c:
        # The end of turn 2 deleted turn 1's: the counter, served, and 2.
        assert c.kv_num_keys(prefix) == 3
        assert c.kv_get(prefix + "served").value == b"2"
    for c in clients:
        c.close()
