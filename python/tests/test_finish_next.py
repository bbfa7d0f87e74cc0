"""A get_task that carries the task its caller finished: one write
finishes it and leases the next (protocol level 9), against a real
cluster, and the record iterator that reads one write per task."""

import collections
import json

import pytest

import raftmaster
from raftmaster import records
from cluster import wait_until

COUNTED = raftmaster.FinishOutcome()


@pytest.fixture(scope="session")
def level9(cluster):
    """The shared cluster once it has raised its protocol level to 9."""
    with raftmaster.Client(cluster.addrs, retry=30, session_ttl=0) as c:
        wait_until(lambda: c.protocol() >= 9, "protocol level 9")
    return cluster


def carrying(p):
    """The requests through proxy p of a get_task that carried a finish."""
    return [r for r in p.seen("/task/get") if b'"finished"' in (r["sent"] or b"")]


def test_get_task_carries_the_finish(level9, make_client, dataset):
    """Each get_task finishes the task before and leases the next: the pass
    is read exactly once, each answer saying the finish counted, and the
    finish of the last task counts on the PassBefore that ends the pass."""
    paths, _ = dataset
    c = make_client()
    c.set_dataset(paths, chunks_per_task=4)
    seen = set()
    last = None
    while True:
        try:
            t = c.get_task(0, finished=last)
        except raftmaster.PassBefore as e:
            assert last is not None and e.finish == COUNTED
            break
        assert t.finish == (COUNTED if last is not None else None)
        assert t.meta.id not in seen
        seen.add(t.meta.id)
        last = t
    assert len(seen) == 10
    job = c.status()["fsm"]
    assert job["pass"] == 1 and job["pending"] == 0


def test_finish_outcomes(level9, make_client, dataset):
    """A finish that task_finished would refuse is reported with its error
    (a stale epoch, an unknown task), one of a task finished already is
    ignored, and the lease is answered all the same: a task, or the error
    that says none is left, which carries the finish's outcome."""
    paths, _ = dataset
    c = make_client()
    c.set_dataset(paths, chunks_per_task=20)
    t1 = c.get_task(0)
    t2 = c.get_task(0, finished=raftmaster.TaskMeta(t1.meta.id, t1.meta.epoch + 7))
    assert t2.finish is not None and isinstance(t2.finish.error, raftmaster.StaleEpoch) and not t2.finish.ignored
    with pytest.raises(raftmaster.NoMoreAvailable) as e:
        c.get_task(0, finished=raftmaster.TaskMeta(999, 1))
    assert e.value.finish is not None and isinstance(e.value.finish.error, raftmaster.UnknownTask)
    with pytest.raises(raftmaster.NoMoreAvailable) as e:
        c.get_task(0, finished=t1)
    assert e.value.finish == COUNTED
    with pytest.raises(raftmaster.NoMoreAvailable) as e:
        c.get_task(0, finished=t1.meta)
    assert e.value.finish == raftmaster.FinishOutcome(ignored=True)
    with pytest.raises(raftmaster.PassBefore) as e:
        c.get_task(0, finished=t2)
    assert e.value.finish == COUNTED
    # An error of a get_task that carried no finish says none.
    with pytest.raises(raftmaster.PassBefore) as e:
        c.get_task(0)
    assert e.value.finish is None


def test_a_retried_get_task_replays_its_finish(level9, make_client, proxies, cluster, dataset):
    """A get_task whose answer was lost after the cluster applied it is
    retried with its request id and answered as the first attempt was,
    the finish's outcome included: on a task, and on the pass's end."""
    paths, _ = dataset
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    c.set_dataset(paths, chunks_per_task=20)
    t1 = c.get_task(0)
    p.drop("/task/get")
    t2 = c.get_task(0, finished=t1)
    first = json.loads(p.dropped[0]["body"])
    assert first["task"]["meta"] == {"id": t2.meta.id, "epoch": t2.meta.epoch}
    assert first["finish"] == {} and t2.finish == COUNTED
    p.drop("/task/get")
    with pytest.raises(raftmaster.PassBefore) as e:
        c.get_task(0, finished=t2)
    assert e.value.finish == COUNTED
    first = json.loads(p.dropped[1]["body"])
    assert first["code"] == "pass_before" and first["finish"] == {}
    sent = carrying(p)
    assert len(sent) == 4
    ids = [r["headers"]["X-Raftmaster-Request-Id"] for r in sent]
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    assert c.status()["fsm"]["pass"] == 1


def test_the_iterator_writes_once_per_task(level9, make_client, proxies, cluster, dataset):
    """The iterator finishes each task with the get_task that leases the
    next, and the pass's last with the one answered PassBefore: no
    task_finished, one get_task per task and one more."""
    paths, recs = dataset
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    c.set_dataset(paths, chunks_per_task=4)
    it = c.records(0)
    got = list(it)
    assert isinstance(it.end, raftmaster.PassBefore)
    assert collections.Counter(got) == collections.Counter(recs)
    assert p.seen("/task/finished") == []
    assert len(p.seen("/task/get")) == 11 and len(carrying(p)) == 10
    assert c.status()["fsm"]["pass"] == 1


REFUSALS = {
    # A cluster below protocol level 9.
    "level 8": (503, {"code": "unavailable", "message": "the cluster is not upgraded yet: a GetTask that carries the "
                      "finished task needs protocol level 9, and the cluster is at 8"}),
    # A node of a release before the field.
    "older node": (400, {"code": "invalid", "message": 'malformed JSON body: json: unknown field "finished"'}),
}


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_below_level_9_the_iterator_reports_on_its_own(make_client, proxies, cluster, dataset, refusal):
    """A cluster that takes no finish with a lease: get_task raises
    UpgradePending at once, nothing done, and the iterator reports its
    tasks with task_finished and asks without, and tries again only after
    RIDE_RETRY."""
    paths, recs = dataset
    p = proxies(cluster.leader())

    def refuse(method, path, body):
        if path.split("?")[0].endswith("/task/get") and b'"finished"' in (body or b""):
            return REFUSALS[refusal]
        return None
    p.intercept = refuse
    c = make_client([p.addr])
    c.set_dataset(paths, chunks_per_task=4)
    t = c.get_task(0)
    with pytest.raises(raftmaster.UpgradePending):
        c.get_task(0, finished=t)
    assert len(carrying(p)) == 1, "not retried"
    c.task_failed(t)  # dispatched again

    it = c.records(0)
    assert collections.Counter(it) == collections.Counter(recs)
    assert isinstance(it.end, raftmaster.PassBefore)
    assert len(carrying(p)) == 2, "tried once, then not for RIDE_RETRY"
    assert len(p.seen("/task/finished")) == 10


def test_the_iterator_tries_again_after_ride_retry(make_client, proxies, cluster, dataset, monkeypatch):
    """Once RIDE_RETRY is over, the iterator lets a get_task carry a finish
    again."""
    paths, recs = dataset
    p = proxies(cluster.leader())
    p.intercept = lambda method, path, body: REFUSALS["level 8"] if b'"finished"' in (body or b"") else None
    monkeypatch.setattr(records, "RIDE_RETRY", 0.0)
    c = make_client([p.addr])
    c.set_dataset(paths, chunks_per_task=4)
    it = c.records(0)
    assert collections.Counter(it) == collections.Counter(recs)
    assert len(carrying(p)) == 10 and len(p.seen("/task/finished")) == 10


def test_get_tasks_reads_a_pass_in_batches(level9, make_client, dataset):
    """get_tasks leases several tasks in one write and reports the batch
    before with the next, each finish's outcome in order: a pass of 10
    tasks read 4 at a time takes 4 requests (the last only finishing),
    every task once, and the finish of the last batch counts on the
    PassBefore that ends the pass."""
    paths, _ = dataset
    c = make_client()
    wait_until(lambda: c.protocol() >= 10, "protocol level 10")
    c.set_dataset(paths, chunks_per_task=1)
    total = c.status()["fsm"]["tasks"]
    seen = set()
    held = []
    calls = 0
    while True:
        calls += 1
        try:
            tasks, outcomes = c.get_tasks(0, 4, finished=held)
        except raftmaster.PassBefore as e:
            assert e.finish == COUNTED and e.more_finish == [COUNTED] * (len(held) - 1)
            break
        assert outcomes == [COUNTED] * len(held)
        for t in tasks:
            assert t.meta.id not in seen
            seen.add(t.meta.id)
        held = tasks
    assert len(seen) == total
    assert calls == -(-total // 4) + 1
    with pytest.raises(ValueError):
        c.get_tasks(0, 0)
    with pytest.raises(ValueError):
        c.get_tasks(0, raftmaster.MAX_TASKS_PER_GET + 1)


def test_renew_leases(level9, make_client, dataset):
    """renew_leases renews a batch held without a session in one write,
    each outcome in order; a stale lease does not fail the others."""
    paths, _ = dataset
    c = make_client()
    wait_until(lambda: c.protocol() >= 10, "protocol level 10")
    c.set_dataset(paths, chunks_per_task=1)
    tasks, _ = c.get_tasks(0, 3)
    stale = raftmaster.TaskMeta(tasks[1].meta.id, tasks[1].meta.epoch + 3)
    out = c.renew_leases([tasks[0], stale, tasks[2].meta])
    assert [e is None for _, e in out] == [True, False, True]
    assert isinstance(out[1][1], raftmaster.StaleEpoch)
    assert out[0][0] > 0 and out[2][0] > 0
    with pytest.raises(ValueError):
        c.renew_leases([])
