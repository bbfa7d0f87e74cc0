"""Cursors, the data position saved with the model, against a real
cluster: the client's calls, the record iterator's consumed offsets and
RecordLoader's state_dict/load_state_dict across a crash, at another
number of workers."""

import collections
import os
import subprocess
import sys

import pytest

import raftmaster
from cluster import REPO, wait_until

torch = pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")

from raftmaster.torch import RecordDataset, RecordLoader  # noqa: E402


@pytest.fixture(scope="session")
def cursor_cluster(cluster):
    """The shared cluster once it has raised its protocol level to cursors'."""
    with raftmaster.Client(cluster.addrs, retry=30, session_ttl=0) as c:
        wait_until(lambda: c.protocol() >= raftmaster.CURSOR_PROTOCOL, "protocol level %d"
                   % raftmaster.CURSOR_PROTOCOL)
    return cluster


def decode(rec):
    return rec.decode()


def take(it, n):
    return [next(it) for _ in range(n)]


def test_a_cursor_counts_what_was_consumed_and_a_restore_reads_the_rest(cursor_cluster, make_client, dataset):
    paths, recs = dataset
    c = make_client()
    # 20 tasks of 6 records (two chunks of 3).
    assert c.set_dataset(paths, chunks_per_task=2).tasks == 20
    it = c.records(0)
    trained = take(it, 16)
    # Two tasks consumed whole, and 4 records of a third: past its first
    # chunk, in the middle of the second.
    (entry,) = it.progress()
    assert entry["consumed"] == 4
    info = c.commit_cursor(7, progress=it.progress())
    assert (info.step, info.pass_id, info.tasks, info.finished, info.in_flight, info.records) == (7, 0, 20, 2, 1, 16)
    # A job's restore generation is 1 before its first restore.
    assert info.generation == 1 and info.id > 0
    listed = c.cursors()
    assert listed.generation == 1 and [x.id for x in listed.cursors] == [info.id]
    detail = c.cursor(info.id)
    assert detail.cursor == info
    assert [(t.task, t.consumed) for t in detail.tasks] == [(entry["meta"]["id"], 4)]
    # Read on past the checkpoint, then crash: those records are lost.
    take(it, 10)
    c.close()

    c2 = make_client()
    r = c2.restore_cursor(info.id)
    assert r.cursor.id == info.id and r.generation == 2
    rest = [rec for rec in c2.records(0)]
    assert collections.Counter(trained + rest) == collections.Counter(recs)

    # Restored again: a commit fenced with the generation before the latest
    # restore is refused.
    c2.restore_cursor(info.id)
    with pytest.raises(raftmaster.CursorFenced):
        c2.commit_cursor(8, generation=2)
    assert c2.commit_cursor(8, generation=3).generation == 3
    assert c2.delete_cursor(info.id) is True
    assert c2.delete_cursor(info.id) is False
    with pytest.raises(raftmaster.UnknownCursor):
        c2.cursor(info.id)
    with pytest.raises(raftmaster.UnknownCursor):
        c2.restore_cursor(info.id)


def test_a_restored_task_yields_only_the_records_after_its_skip(cursor_cluster, make_client, dataset):
    paths, recs = dataset
    c = make_client()
    c.set_dataset(paths, chunks_per_task=2)
    t = c.get_task(0)
    got, first = raftmaster.records._read_task(t)
    assert len(got) == t.record_count == 6 and first == 0
    # 4 of its 6 records consumed: past its first chunk of 3.
    assert c.report_progress([]) == 0
    assert c.report_progress([{"meta": {"id": t.meta.id, "epoch": t.meta.epoch + 1}, "consumed": 2}]) == 0
    assert c.report_progress([(t, 3)]) == 1
    with pytest.raises(ValueError):
        c.report_progress([{"meta": {"id": t.meta.id}, "consumed": 2}])
    info = c.commit_cursor(1, progress=[(t.meta, 4)])
    assert (info.finished, info.in_flight, info.records) == (0, 1, 4)
    c.restore_cursor(info.id)
    it = c.records(0)
    rest, offsets = [], []
    for rec in it:
        rest.append(rec)
        if rec in got:
            offsets.append(it.last[1])
            assert it.last[0].id == t.meta.id and it.last[2] == 6
    assert offsets == [4, 5]
    assert collections.Counter(got[:4] + rest) == collections.Counter(recs)


def train(loader, steps):
    """Take steps batches of the loader's iterator; return it and the records trained."""
    it = iter(loader)
    trained = []
    for _ in range(steps):
        trained.extend(next(it))
    return it, trained


def loader_of(cluster, job, paths, workers):
    # Sessions that outlive a loaded machine's pauses: one that expires
    # hands its tasks back, to be read again by another trainer. A crashed
    # trainer's session needs no expiry: a restore revokes its leases.
    ds = RecordDataset(cluster.addrs, job=job, paths=paths, dataset_options={"chunks_per_task": 2},
                       transform=decode, client_options={"retry": 30, "session_ttl": 30})
    return RecordLoader(ds, batch_size=4, num_workers=workers, collate_fn=list)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 4 workers on a small machine
@pytest.mark.parametrize("before,after", [(0, 2), (2, 4), (4, 0)])
def test_a_checkpoint_resumes_at_another_worker_count_with_every_record_once(cursor_cluster, job, dataset, before,
                                                                             after):
    paths, recs = dataset
    want = collections.Counter(r.decode() for r in recs)
    loader = loader_of(cursor_cluster, job, paths, before)
    it, trained = train(loader, 7)
    state = loader.state_dict()
    assert state["job"] == job and isinstance(state["cursor"], int)
    # Training goes on past the checkpoint, and the process crashes: the
    # records trained since are lost with the model's updates.
    for _ in range(3):
        next(it)
    it.close()
    loader.close()

    resumed = loader_of(cursor_cluster, job, paths, after)
    resumed.load_state_dict(state)
    assert resumed.pass_id == 0 and resumed.step == 7
    rest = [r for batch in resumed for r in batch]
    assert collections.Counter(trained + rest) == want
    # Every task of the pass was reported finished: the next pass is whole.
    assert resumed.pass_id == 1
    assert collections.Counter(r for batch in resumed for r in batch) == want
    resumed.close()


def test_ranks_report_their_progress_and_one_commits_for_all(cursor_cluster, job, dataset):
    paths, recs = dataset
    want = collections.Counter(r.decode() for r in recs)
    ranks = [loader_of(cursor_cluster, job, paths, 0), loader_of(cursor_cluster, job, paths, 2)]
    its = [iter(r) for r in ranks]
    trained = []
    for _ in range(4):
        for it in its:
            trained.extend(next(it))
    # Every rank stops and reports; rank 0 commits and "broadcasts" the id.
    for r in ranks:
        r.report_progress()
    cursor = ranks[0].commit_cursor()
    assert cursor.records == len(trained)
    states = [r.state_dict(cursor=cursor.id) for r in ranks]
    assert states[0] == states[1] == {"job": job, "cursor": cursor.id}
    for it in its:
        next(it)  # lost
        it.close()
    for r in ranks:
        r.close()

    ranks = [loader_of(cursor_cluster, job, paths, 2), loader_of(cursor_cluster, job, paths, 0),
             loader_of(cursor_cluster, job, paths, 1)]
    ranks[0].load_state_dict(states[0])
    for r in ranks[1:]:
        r.load_state_dict(states[0], restore=False)
        assert r.pass_id == cursor.pass_id and r.step == cursor.step
    its = [iter(r) for r in ranks]
    rest = []
    while its:
        for it in list(its):
            try:
                rest.extend(next(it))
            except StopIteration:
                its.remove(it)
    assert collections.Counter(trained + rest) == want
    for r in ranks:
        r.close()


def test_what_the_loader_refuses(cursor_cluster, job, dataset):
    paths, _ = dataset
    ds = RecordDataset(cursor_cluster.addrs, job=job, paths=paths)
    with pytest.raises(ValueError, match="drop_last"):
        RecordLoader(ds, batch_size=4, drop_last=True)
    loader = RecordLoader(ds, batch_size=4)
    with pytest.raises(ValueError, match="job"):
        loader.load_state_dict({"job": job + "-other", "cursor": 1})
    with pytest.raises(ValueError, match="cursor"):
        loader.load_state_dict({"job": job})
    with pytest.raises(raftmaster.UnknownCursor):
        loader.load_state_dict({"job": job, "cursor": 999})
    loader.close()


def test_the_resume_example_trains_each_record_once_across_a_crash(cursor_cluster, job, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.join(REPO, "examples", "python", "train_resume.py"),
           "--addrs", ",".join(cursor_cluster.addrs), "--job", job, "--data", str(tmp_path / "data"),
           "--checkpoint", str(tmp_path / "ck.pt"), "--epochs", "2", "--every", "20"]
    out = subprocess.run(cmd + ["--crash-after", "30", "--workers", "0"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 3 and "crashing at step 30" in out.stdout, out.stdout + out.stderr
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "resumed at step 20, pass 0" in out.stdout, out.stdout
    assert "pass 0: 2000 records trained into the model" in out.stdout, out.stdout
    assert "pass 1: 2000 records trained into the model" in out.stdout, out.stdout
    assert out.stdout.rstrip().endswith("done")
