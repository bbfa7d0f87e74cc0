"""Every client call against a real 3-node cluster, each test in a job of its own."""

import json
import logging
import subprocess
import sys
import threading
import uuid

import pytest

import raftmaster
from raftmaster import TaskMeta
from cluster import wait_until
from conftest import write_dataset


def test_set_dataset_counts_the_first_one(client, dataset, tmp_path):
    paths, _ = dataset
    res = client.set_dataset(paths, chunks_per_task=4)
    assert (res.ignored, res.files, res.chunks, res.tasks) == (False, 2, 40, 10)
    other, _ = write_dataset(tmp_path, files=1, prefix="other")
    again = client.set_dataset(other)
    assert again.ignored
    task = client.get_task(0)
    assert {c.path for c in task.chunks} <= set(paths)


def test_a_set_dataset_whose_answer_is_lost_says_it_installed(make_client, proxies, cluster, dataset):
    """Retried with its request id after its answer was lost, the request
    that installed the dataset is told so, not that it was ignored."""
    paths, _ = dataset
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    p.drop("/dataset")
    res = c.set_dataset(paths, chunks_per_task=4)
    assert len(p.seen("/dataset")) == 2 and len(p.dropped) == 1
    assert (res.ignored, res.files, res.chunks, res.tasks) == (False, 2, 40, 10)
    assert make_client().set_dataset(paths).ignored


def test_set_dataset_warns_of_other_patterns(make_client, dataset, tmp_path, caplog, job):
    """A set_dataset whose patterns differ from those the job's dataset was
    set with is ignored, answered with them, and the raftmaster logger
    warns, naming both; the same patterns, in another order, are ignored
    without a word."""
    paths, _ = dataset
    first, second = make_client(), make_client()
    wait_until(lambda: first.status().get("cluster_protocol", 0) >= 4, "protocol level 4")
    res = first.set_dataset(paths)
    assert not res.ignored and res.current_patterns == tuple(paths)
    other, _ = write_dataset(tmp_path, files=1, prefix="other")
    with caplog.at_level(logging.INFO, logger="raftmaster"):
        same = second.set_dataset(list(reversed(paths)))
        assert same.ignored and same.current_patterns == tuple(paths)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        again = second.set_dataset(other)
    assert again.ignored and again.current_patterns == tuple(paths)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "raftmaster"]
    assert len(warnings) == 1, caplog.text
    msg = warnings[0].getMessage()
    assert job in msg and all(p in msg for p in other + paths), msg
    assert second.set_dataset(paths).ignored  # and quietly again
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


def test_set_dataset_with_client_indexing(make_client, dataset):
    paths, recs = dataset
    c = make_client(client_indexing=True)
    res = c.set_dataset([paths[0].replace("000", "*")], chunks_per_task=40)
    assert (res.files, res.chunks, res.tasks) == (2, 40, 1)
    task = c.get_task(0)
    assert [ch.path for ch in task.chunks] == [paths[0]] * 20 + [paths[1]] * 20
    assert sum(ch.records for ch in task.chunks) == len(recs)


def test_get_task_leases_each_task_once_per_pass(make_client, dataset):
    paths, _ = dataset
    # Without sessions, which hold the tasks they lease with no deadline.
    client, other = make_client(session_ttl=0), make_client(session_ttl=0)
    client.set_dataset(paths, chunks_per_task=10)
    leased = [client.get_task(0), other.get_task(0), client.get_task(0), other.get_task(0)]
    assert sorted(t.meta.id for t in leased) == [1, 2, 3, 4]
    assert all(t.meta.epoch == 1 and t.pass_id == 0 and t.lease == 60.0 for t in leased)
    with pytest.raises(raftmaster.NoMoreAvailable):
        client.get_task(0)
    with pytest.raises(raftmaster.PassAfter):
        client.get_task(1)
    for t in leased:
        client.task_finished(t.meta)
    with pytest.raises(raftmaster.PassBefore):
        client.get_task(0)
    assert client.get_task(1).pass_id == 1


def test_task_failed_dispatches_again_with_a_new_epoch(make_client, dataset):
    paths, _ = dataset
    client = make_client(session_ttl=0)  # leases with a deadline, renewed
    client.set_dataset(paths, chunks_per_task=40)
    first = client.get_task(0)
    assert client.renew_lease(first) == first.lease > 0
    client.task_failed(first.meta)
    second = client.get_task(0)
    assert second.meta == TaskMeta(first.meta.id, first.meta.epoch + 1)
    with pytest.raises(raftmaster.StaleEpoch):
        client.renew_lease(first.meta)
    client.renew_lease(second.meta)
    client.task_finished(second)


def test_errors_of_the_task_calls(client, make_client, dataset):
    with pytest.raises(raftmaster.NoDataset):
        client.get_task(0)
    paths, _ = dataset
    with pytest.raises(raftmaster.Invalid) as e:
        client.set_dataset(paths, chunks_per_task=-1)
    assert e.value.status == 400 and "chunks_per_task" in e.value.message
    with pytest.raises(raftmaster.Invalid):
        client.set_dataset([paths[0] + ".nothing-matches"])
    client.set_dataset(paths, chunks_per_task=40)
    with pytest.raises(raftmaster.UnknownTask) as e:
        client.task_finished(TaskMeta(999, 1))
    assert e.value.status == 404
    task = client.get_task(0)
    with pytest.raises(raftmaster.StaleEpoch) as e:
        client.task_finished(TaskMeta(task.meta.id, 7))
    assert e.value.status == 409 and e.value.applied_at


def test_all_task_failed(client, dataset):
    paths, _ = dataset
    client.set_dataset(paths, chunks_per_task=20, failure_max=0)
    for _ in range(2):
        client.task_failed(client.get_task(0))
    with pytest.raises(raftmaster.AllTaskFailed):
        client.get_task(0)


def test_request_save_model_grants_one_trainer_at_a_time(client):
    assert client.request_save_model("trainer-a", 30)
    assert not client.request_save_model("trainer-b", 30)
    assert client.request_save_model("trainer-a", 30)  # the holder extends it
    with pytest.raises(raftmaster.Invalid):
        client.request_save_model("", 30)


def test_a_retried_grant_says_what_remains_of_the_lease(make_client, proxies, cluster, dataset):
    """A save-model request, or a lease renewal, whose answer is lost is
    retried with its request id: the retry's answer says how much of the
    lease remains then, not the length the first answer gave."""
    p = proxies(cluster.leader())
    c = make_client([p.addr], session_ttl=0)  # a task lease with a deadline, renewed
    p.drop("/savemodel")
    grant = c.request_save_model_lease("trainer-a", 30)
    assert len(p.seen("/savemodel")) == 2 and len(p.dropped) == 1
    first = json.loads(p.dropped[0]["body"])
    assert first["granted"] and first["lease"] == "30s"
    assert grant.granted and 20 < grant.lease < 30
    assert not c.request_save_model_lease("trainer-b", 30).granted

    c.set_dataset(dataset[0], task_timeout=60)
    t = c.get_task(0)
    p.drop("/task/renew")
    lease = c.renew_lease(t)
    first = json.loads(p.dropped[1]["body"])
    assert first["lease"] == "1m0s" and 50 < lease < 60


def test_status(client, cluster):
    st = client.status()
    assert st["state"] == "Leader" and st["ready"]
    assert st["leader"]["api_addr"] in cluster.addrs
    stale = raftmaster.Client([cluster.follower()], retry=5).status(stale=True)
    assert stale["state"] == "Follower"


def test_job_routes(make_client, proxies, cluster, dataset, job):
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    paths, _ = dataset
    c.set_dataset(paths)
    c.get_task(0)
    c.status()
    assert [r["path"] for r in p.seen("/dataset")] == ["/v1/jobs/%s/dataset" % job]
    assert [r["path"] for r in p.seen("/task/get")] == ["/v1/jobs/%s/task/get" % job]
    assert [r["path"].split("?")[0] for r in p.seen("/status")] == ["/v1/status"]
    # Another job, and the default one, do not see this job's dataset.
    with pytest.raises(raftmaster.NoDataset):
        make_client(job="t-" + uuid.uuid4().hex[:12]).get_task(0)


def _join_all(client_for, group, n, data_of, **kw):
    results, errs = {}, {}
    members = [uuid.uuid4() for _ in range(n)]

    def run(i):
        try:
            results[i] = client_for(i).join(group, members[i], n, data_of(i), **kw)
        except Exception as e:  # reported below
            errs[i] = e
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return members, results, errs


def test_join_gathers_every_members_data_in_join_order(make_client):
    clients = [make_client() for _ in range(3)]
    members, results, errs = _join_all(lambda i: clients[i], "rendezvous", 3, lambda i: {"host": "h%d" % i, "i": i})
    assert not errs
    data = results[0].data
    assert sorted(d["i"] for d in data) == [0, 1, 2]
    assert all(r.data == data for r in results.values())
    # The rank is the member's index in the data.
    assert all(data[r.rank]["i"] == i for i, r in results.items())
    data2, rank = results[1]
    assert data2 == data and rank == results[1].rank


def test_join_errors(make_client, proxies, cluster):
    # a's requests pass a proxy, which shows when a's join is applied: its watch follows.
    p = proxies(cluster.leader())
    a, b = make_client([p.addr]), make_client()
    member = uuid.uuid4()
    caught = {}

    def joined(n):
        wait_until(lambda: len(p.seen("/allgather/watch")) >= n, "a watch of the join")

    def wait_join(name, c, *args, **kw):
        try:
            c.join(*args, **kw)
        except raftmaster.RaftmasterError as e:
            caught[name] = e

    # Reconnected: a second join of the same member replaces the first.
    t = threading.Thread(target=wait_join, args=("first", a, "g-re", member, 2, 1))
    t.start()
    joined(1)
    t2 = threading.Thread(target=wait_join, args=("second", b, "g-re", member, 2, 2))
    t2.start()
    t.join(60)
    assert isinstance(caught.get("first"), raftmaster.Reconnected)
    # Closed: the member leaves.
    b.leave("g-re", member)
    t2.join(60)
    assert isinstance(caught.get("second"), raftmaster.Closed)
    # GroupMismatch: a join that disagrees with the group's size.
    watches = len(p.seen("/allgather/watch"))
    t3 = threading.Thread(target=wait_join, args=("third", a, "g-mis", uuid.uuid4(), 2, 0))
    t3.start()
    joined(watches + 1)
    with pytest.raises(raftmaster.GroupMismatch):
        b.join("g-mis", uuid.uuid4(), 3, 0)
    b.join("g-mis", uuid.uuid4(), 2, 0)
    t3.join(60)
    assert "third" not in caught
    with pytest.raises(raftmaster.Invalid):
        a.join("g-bad", "not-a-uuid", 2, 0)


def test_join_deadline_and_overdue(make_client):
    c = make_client()
    told = []
    with pytest.raises(raftmaster.AllGatherTimeoutExceeded):
        c.join("g-deadline", uuid.uuid4(), 2, "x", timeout=0.3, deadline=True, on_timeout=told.append)
    assert len(told) == 1 and isinstance(told[0], raftmaster.AllGatherTimeoutExceeded)

    # Without deadline the group stays open: the member is told it is late,
    # and the late member still completes it.
    late = []
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", c.join("g-soft", uuid.uuid4(), 2, "a", timeout=0.3,
                                                                   on_timeout=late.append)))
    t.start()
    wait_until(lambda: late, "the overdue callback")
    r = make_client().join("g-soft", uuid.uuid4(), 2, "b")
    t.join(60)
    assert r.data == ["a", "b"] and out["r"].data == ["a", "b"] and len(late) == 1


def test_join_deadline_stays_timed_out_for_a_late_member(make_client, proxies, cluster):
    # a's watch answers are lost on the way back (its client retries)
    # until other members have started the group afresh: the answer to
    # a's join is still the timeout, and on_timeout is called.
    b = make_client()
    wait_until(lambda: b.status().get("cluster_protocol", 0) >= 2, "protocol level 2")
    p = proxies(cluster.leader())
    a = make_client([p.addr])
    p.drop("/allgather/watch", 1000)
    told, out = [], {}

    def join_a():
        try:
            a.join("g-late", uuid.uuid4(), 3, "a", timeout=0.5, deadline=True, on_timeout=told.append)
        except raftmaster.RaftmasterError as e:
            out["a"] = e
    t = threading.Thread(target=join_a)
    t.start()
    member_b = uuid.uuid4()
    with pytest.raises(raftmaster.AllGatherTimeoutExceeded):
        b.join("g-late", member_b, 3, "b", timeout=0.5, deadline=True)
    wait_until(lambda: any(e["status"] == 409 for e in p.dropped), "a's timeout answer, dropped")
    # The group starts afresh and completes without a.
    again = {}
    t2 = threading.Thread(target=lambda: again.setdefault("b", b.join("g-late", member_b, 2, "b2", deadline=True)))
    t2.start()
    assert sorted(make_client().join("g-late", uuid.uuid4(), 2, "c", deadline=True).data) == ["b2", "c"]
    t2.join(60)
    assert sorted(again["b"].data) == ["b2", "c"]
    p.answer("/allgather/watch")
    t.join(120)
    assert isinstance(out.get("a"), raftmaster.AllGatherTimeoutExceeded), out
    assert len(told) == 1 and isinstance(told[0], raftmaster.AllGatherTimeoutExceeded)


def test_closed_client_refuses_calls(cluster, job):
    c = raftmaster.Client(cluster.addrs, job=job)
    c.close()
    with pytest.raises(raftmaster.ClientClosed):
        c.get_task(0)


def test_the_package_and_the_launcher_do_not_need_torch():
    from cluster import REPO
    code = ("import sys; sys.modules['torch'] = None\n"  # as if torch were not installed
            "import raftmaster, raftmaster.torchrun\n"
            "raftmaster.torchrun.main(['--nnodes', '1', 'train.py'])\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO + "/python", capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "raftmaster.torchrun needs PyTorch: apt-get install python3-torch" in p.stderr
