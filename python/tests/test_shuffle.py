"""Seeded shuffles against a real cluster: each pass's tasks first
dispatched in the permutation of (seed, pass), which this file computes
again on its own; shuffle=False in id order; and the shuffle buffer of
the record iterator and of RecordDataset within a task, the same for every
reader of the task and across a restored cursor."""

import collections
import random

import pytest

import raftmaster
from raftmaster.client import Chunk, Task, TaskMeta
from raftmaster.records import shuffle_records, task_rng
from cluster import wait_until

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def pass_order(seed, pass_id, n):
    """The task ids of a pass of n tasks in the order the cluster first
    dispatches them: fsm/shuffle.go's Feistel network with cycle walking,
    written again from its description."""
    width = (n - 1).bit_length() if n > 1 else 0
    hi_bits = width // 2
    lo_bits = width - hi_bits
    base = mix64((mix64(seed ^ 0x243F6A8885A308D3) + pass_id * GOLDEN) & M64)
    keys = [mix64((base + (r + 1) * 0x9E3779B97F4A7C55) & M64) for r in range(4)]

    def feistel(x):
        hb, lb = hi_bits, lo_bits
        hi, lo = x >> lb, x & ((1 << lb) - 1)
        for k in keys:
            f = mix64(k ^ ((lo * GOLDEN) & M64))
            hi, lo = lo, (hi ^ f) & ((1 << hb) - 1)
            hb, lb = lb, hb
        return hi << lb | lo

    out = []
    for i in range(n):
        x = feistel(i)
        while x >= n:
            x = feistel(x)
        out.append(x + 1)
    return out


@pytest.fixture(scope="session")
def shuffle_cluster(cluster):
    """The shared cluster once it has raised its protocol level to seeded
    shuffles'."""
    with raftmaster.Client(cluster.addrs, retry=30, session_ttl=0) as c:
        wait_until(lambda: c.protocol() >= raftmaster.SHUFFLE_PROTOCOL, "protocol level %d"
                   % raftmaster.SHUFFLE_PROTOCOL)
    return cluster


def test_the_permutation_written_again_matches_the_pinned_orders():
    # fsm/shuffle_test.go pins these.
    assert pass_order(1, 0, 100)[:10] == [38, 42, 15, 2, 39, 93, 75, 18, 57, 43]
    assert pass_order(42, 3, 10) == [2, 1, 3, 8, 5, 6, 4, 7, 10, 9]
    for n in (0, 1, 2, 3, 17, 64, 100):
        assert sorted(pass_order(9, 2, n)) == list(range(1, n + 1))


def test_each_pass_is_first_dispatched_in_the_permutation_of_its_seed(shuffle_cluster, make_client, dataset):
    paths, _ = dataset
    c, other = make_client(session_ttl=0), make_client(session_ttl=0)
    res = c.set_dataset(paths, chunks_per_task=2, seed=12345)
    assert (res.ignored, res.tasks, res.shuffle, res.seed) == (False, 20, True, 12345)
    # Another call, whatever it asks, is answered with the order in place.
    again = other.set_dataset(paths, seed=1, shuffle=False)
    assert (again.ignored, again.shuffle, again.seed) == (True, True, 12345)
    for pass_id in range(2):
        got = []
        for i in range(res.tasks):
            t = (c if i % 2 else other).get_task(pass_id)
            assert t.seed == 12345 and t.pass_id == pass_id
            got.append(t.meta.id)
            c.task_finished(t)
        assert got == pass_order(12345, pass_id, res.tasks), "pass %d" % pass_id
    assert pass_order(12345, 0, 20) != pass_order(12345, 1, 20)


def test_a_drawn_seed_is_recorded_and_shuffle_false_keeps_id_order(shuffle_cluster, make_client, dataset, job):
    paths, _ = dataset
    drawn = make_client(job=job + "-drawn").set_dataset(paths, chunks_per_task=4)
    assert drawn.shuffle and 0 < drawn.seed < 1 << 64
    c = make_client(session_ttl=0)
    res = c.set_dataset(paths, chunks_per_task=4, shuffle=False)
    assert not res.shuffle and res.seed > 0
    ids = [c.get_task(0).meta.id for _ in range(res.tasks)]
    assert ids == list(range(1, res.tasks + 1))
    with pytest.raises(ValueError):
        c.set_dataset(paths, seed=-1)
    with pytest.raises(ValueError):
        c.records(0, shuffle_buffer=-1)


def test_shuffle_records_is_a_seeded_permutation():
    recs = list(range(50))
    for buffer in (0, 1):
        assert shuffle_records(recs, buffer, random.Random(1)) == recs
    for buffer in (2, 8, 50, 1000):
        a = shuffle_records(recs, buffer, random.Random(7))
        assert sorted(a) == recs and a != recs
        assert a == shuffle_records(recs, buffer, random.Random(7))
    # A buffer of b yields no record more than b-1 places before its turn:
    # it cannot come out before it was read.
    for buffer in (2, 8):
        a = shuffle_records(recs, buffer, random.Random(3))
        assert all(a.index(r) >= r - (buffer - 1) for r in recs)
    # The generator of a task is its seed's, pass's and id's, not its
    # epoch's: a task dispatched again is shuffled alike.
    t = Task(TaskMeta(3, 1), [Chunk("/x", 0, 50)], pass_id=2, seed=99)
    assert task_rng(t).random() == task_rng(Task(TaskMeta(3, 7), [], pass_id=2, seed=99)).random()
    others = [Task(TaskMeta(4, 1), [], pass_id=2, seed=99), Task(TaskMeta(3, 1), [], pass_id=1, seed=99),
              Task(TaskMeta(3, 1), [], pass_id=2, seed=98)]
    assert all(task_rng(o).random() != task_rng(t).random() for o in others)


def test_the_shuffle_buffer_is_the_same_for_every_reader_and_after_a_restore(shuffle_cluster, make_client, dataset):
    paths, recs = dataset
    c = make_client()
    # 2 tasks of 60 records, each its file's.
    res = c.set_dataset(paths, chunks_per_task=20, seed=77)
    assert res.tasks == 2
    it = c.records(0, shuffle_buffer=16)
    first = [next(it) for _ in range(25)]
    task, offset, count = it.last
    assert offset == 24 and count == 60
    info = c.commit_cursor(1, progress=it.progress())
    rest_then = list(it)  # the run goes on past the checkpoint
    whole = first + rest_then
    assert collections.Counter(whole) == collections.Counter(recs)
    # Within each task, shuffled: not in file order.
    assert whole[:60] != sorted(whole[:60]) and whole[60:] != sorted(whole[60:])

    # Restored: the task in the middle is read again from the record after
    # the 25 of the shuffled order that were consumed, by another reader.
    other = make_client()
    other.restore_cursor(info.id)
    again = list(other.records(0, shuffle_buffer=16))
    assert first + again == whole

    # Pass 1 of a job with the same seed, read in another job by another
    # client: the same dispatch and the same shuffles, pass for pass.
    d = make_client(job=c.job + "-twin")
    d.set_dataset(paths, chunks_per_task=20, seed=77)
    assert list(d.records(0, shuffle_buffer=16)) == whole


def test_record_dataset_shuffles_within_a_task(shuffle_cluster, make_client, dataset, job):
    pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")
    from raftmaster.torch import RecordDataset
    paths, recs = dataset
    with pytest.raises(ValueError):
        RecordDataset(shuffle_cluster.addrs, job=job, shuffle_buffer=-1)
    opts = {"chunks_per_task": 20, "seed": 5}
    ds = RecordDataset(shuffle_cluster.addrs, job=job, paths=paths, dataset_options=opts, shuffle_buffer=100)
    got = list(ds)
    ds.close()
    assert collections.Counter(got) == collections.Counter(recs) and got != recs
    # The record iterator of another job of the same seed gives the same.
    twin = make_client(job=job + "-twin")
    twin.set_dataset(paths, **opts)
    assert list(twin.records(0, shuffle_buffer=100)) == got
