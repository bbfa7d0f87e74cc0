"""The record iterator of a pass, against a real cluster."""

import collections
import os
import threading

import pytest

import raftmaster
from cluster import http_get, wait_until


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def read_pass(c, pass_id, out, key):
    it = c.records(pass_id)
    out[key] = (list(it), it.end)


def test_trainers_read_each_record_of_a_pass_exactly_once(make_client, dataset):
    paths, recs = dataset
    clients = [make_client() for _ in range(3)]
    clients[0].set_dataset(paths, chunks_per_task=2)
    for pass_id in range(2):
        out = {}
        threads = [threading.Thread(target=read_pass, args=(c, pass_id, out, i)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        seen = collections.Counter(r for got, _ in out.values() for r in got)
        assert seen == collections.Counter(recs), "pass %d" % pass_id
        for _, end in out.values():
            assert isinstance(end, (raftmaster.PassBefore, raftmaster.NoMoreAvailable))
    # Pass 0 is over: asking for it again ends at once.
    it = clients[0].records(0)
    assert list(it) == [] and isinstance(it.end, raftmaster.PassBefore)


def test_a_trainer_waits_for_the_dataset_and_for_its_pass(make_client, dataset):
    paths, recs = dataset
    early, setter = make_client(), make_client()
    out = {}
    t = threading.Thread(target=read_pass, args=(early, 0, out, "early"))
    t.start()
    setter.set_dataset(paths, chunks_per_task=40)
    t.join(60)
    assert out["early"][0] == recs
    # A trainer asking for pass 2 while pass 1 is still held waits for it.
    held = setter.get_task(1)
    t2 = threading.Thread(target=read_pass, args=(early, 2, out, "later"))
    t2.start()
    setter.task_finished(held)
    t2.join(60)
    assert out["later"][0] == recs


def wait_for_plain_leases(c, timeout):
    """Wait until a lease granted in c's job lasts timeout: a new leader
    extends the leases it grants for its first seconds (serve
    --failover-grace), and the test wants renewals at the timeout's pace
    from the first one."""
    def plain():
        t = c.get_task(0)
        c.task_failed(t)
        return t.lease <= timeout
    wait_until(plain, "leases of %ss" % timeout, every=0.2)


def test_the_lease_is_renewed_while_a_task_is_read(make_client, proxies, cluster, dataset):
    paths, recs = dataset
    p = proxies(cluster.leader())
    # Without a session, which would hold the task without renewals.
    reader, other = make_client([p.addr], session_ttl=0), make_client()
    reader.set_dataset(paths, chunks_per_task=40, task_timeout=0.6, failure_max=1000)
    wait_for_plain_leases(other, 0.6)
    it = reader.records(0)
    first = next(it)
    # Hold the task for several leases: the iterator renews it meanwhile.

    def answered():
        return [r["status"] for r in p.seen("/task/renew") if r["status"] is not None]
    wait_until(lambda: len(answered()) >= 6, "renewals")
    assert answered()[:6] == [200] * 6
    with pytest.raises(raftmaster.NoMoreAvailable):
        other.get_task(0)
    assert [first] + list(it) == recs
    assert isinstance(it.end, raftmaster.PassBefore)
    # Finished once: by the get_task answered PassBefore, or, before the
    # cluster reached protocol level 9, on its own.
    carried = [r for r in p.seen("/task/get") if b'"finished"' in (r["sent"] or b"") and r["status"] != 503]
    assert len(p.seen("/task/finished")) + len(carried) == 1


def test_closing_the_iterator_hands_its_task_back(make_client, dataset):
    paths, recs = dataset
    a, b = make_client(), make_client()
    a.set_dataset(paths, chunks_per_task=40)
    it = a.records(0)
    next(it)
    with pytest.raises(raftmaster.NoMoreAvailable):
        b.get_task(0)
    it.close()
    task = b.get_task(0)
    assert task.meta.epoch == 2
    assert list(it) == []


def test_a_damaged_task_is_failed_and_reported_once(make_client, dataset):
    paths, recs = dataset
    # Damage the data of the first chunk of the second file: its headers
    # still index, so the leader accepts the dataset.
    flip_byte(paths[1], 25)
    c = make_client()
    c.set_dataset(paths, chunks_per_task=4, failure_max=0, shuffle=False)  # in file order
    it = c.records(0)
    got, damaged = [], []
    while True:
        try:
            got.append(next(it))
        except StopIteration:
            break
        except raftmaster.ChunkError as e:
            damaged.append(e)
    assert len(damaged) == 1
    e = damaged[0]
    assert e.corrupt and e.path == paths[1] and e.offset == 0 and e.chunk == 0
    assert "checksum mismatch" in str(e)
    # Every record but those of the damaged task (the first 4 chunks of the
    # second file, 3 records each), once.
    assert got == recs[:60] + recs[72:]


def test_skip_damaged_and_unreadable_files(make_client, dataset):
    paths, recs = dataset
    c = make_client()
    c.set_dataset(paths, chunks_per_task=20, failure_max=0)
    os.rename(paths[0], paths[0] + ".gone")
    it = c.records(0, skip_damaged=True)
    assert list(it) == recs[60:]
    c2 = make_client(job=c.job + "x")
    os.rename(paths[0] + ".gone", paths[0])
    c2.set_dataset(paths, chunks_per_task=20, failure_max=0, shuffle=False)  # the missing file's task first
    os.rename(paths[0], paths[0] + ".gone")
    it2 = c2.records(0)
    with pytest.raises(raftmaster.ChunkError) as e:
        next(it2)
    assert not e.value.corrupt and isinstance(e.value.err, FileNotFoundError)
    assert list(it2) == recs[60:]


def test_all_tasks_failing_is_raised(make_client, dataset):
    paths, _ = dataset
    for p in paths:
        flip_byte(p, 25)
    c = make_client()
    c.set_dataset(paths, chunks_per_task=20, failure_max=0)
    it = c.records(0, skip_damaged=True)
    with pytest.raises(raftmaster.AllTaskFailed):
        list(it)
    assert isinstance(it.end, raftmaster.AllTaskFailed)


def test_closing_the_client_ends_its_iterators(cluster, job, dataset):
    paths, _ = dataset
    c = raftmaster.Client(cluster.addrs, job=job)
    it = c.records(0)  # no dataset: it waits
    out = {}

    def run():
        try:
            next(it)
        except Exception as e:  # the outcome is checked below
            out["err"] = e
    t = threading.Thread(target=run)
    t.start()
    c.close()
    t.join(30)
    assert isinstance(out.get("err"), raftmaster.ClientClosed)


def test_a_reader_of_a_deleted_job_is_told(make_client, cluster, job, dataset):
    """A trainer reading a job that is deleted gets UnknownJob once the
    records it already read are yielded, rather than wait for a dataset for
    ever; so does every later pass and get_task, even once a job of the
    name is created again. A new client cannot tell the deleted job from
    one not created yet, and waits."""
    paths, recs = dataset
    reader, setter, admin = make_client(), make_client(), make_client(job=None)
    setter.set_dataset(paths, chunks_per_task=4)
    it = reader.records(0)
    got = [next(it)]
    admin.delete_job(job)
    with pytest.raises(raftmaster.UnknownJob):
        for rec in it:
            got.append(rec)
    assert 1 <= len(got) < len(recs) and isinstance(it.end, raftmaster.UnknownJob)
    with pytest.raises(raftmaster.UnknownJob):
        list(reader.records(1))
    with pytest.raises(raftmaster.NoDataset):
        make_client().get_task(0)
    setter.set_dataset(paths, chunks_per_task=4)
    with pytest.raises(raftmaster.UnknownJob):
        reader.get_task(0)
    # The job created again leased nothing to the reader of the old one.
    status, doc = http_get(cluster.leader(), "/v1/jobs/%s" % job)
    assert status == 200 and doc["pending"] == 0 and doc["todo"] == doc["tasks"]
