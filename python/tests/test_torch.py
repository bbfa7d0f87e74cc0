"""raftmaster.torch.RecordDataset with real DataLoader workers."""

import collections
import pickle

import pytest

from raftmaster import _transport

torch = pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")
from torch.utils.data import DataLoader  # noqa: E402

from raftmaster.torch import RecordDataset  # noqa: E402


def decode(rec):
    return rec.decode()


def test_two_workers_read_each_record_of_every_pass_once(proxies, session_cluster, job, dataset):
    paths, recs = dataset
    p = proxies(session_cluster.leader())
    ds = RecordDataset([p.addr], job=job, paths=paths, dataset_options={"chunks_per_task": 2},
                       transform=decode)
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    want = collections.Counter(r.decode() for r in recs)
    for epoch in range(2):
        before = len(p.seen("/task/get"))
        ds.set_epoch(epoch)
        got = collections.Counter(loader)
        assert got == want, "epoch %d" % epoch
        # Each worker was a trainer of its own: two clients asked for tasks,
        # each under a session of its own.
        sessions = {r["headers"].get(_transport.HEADER_SESSION) for r in p.seen("/task/get")[before:]}
        assert len(sessions) == 2 and None not in sessions, sessions
    assert ds._client is None  # the main process made none


def test_persistent_workers_move_to_the_next_pass_by_themselves(cluster, job, dataset):
    paths, recs = dataset
    ds = RecordDataset(cluster.addrs, job=job, paths=paths, dataset_options={"chunks_per_task": 4})
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True,
                        collate_fn=lambda batch: batch)
    for epoch in range(2):
        got = collections.Counter(r for batch in loader for r in batch)
        assert got == collections.Counter(recs), "epoch %d" % epoch


def test_in_the_main_process(cluster, job, dataset):
    paths, recs = dataset
    ds = RecordDataset(",".join(cluster.addrs), job=job, paths=paths, dataset_options={"shuffle": False})
    assert list(ds) == recs
    assert ds.pass_id == 1
    assert list(ds) == recs
    # Epochs told: the warning names the cause, the job being past the
    # pass, and not set_epoch.
    with pytest.warns(RuntimeWarning, match=r"the job is at pass 2\).*raftmaster job delete") as caught:
        ds.set_epoch(0)
        assert list(ds) == []
    assert not any("set_epoch" in str(w.message) for w in caught)
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._client is None and clone.pass_id == ds.pass_id
    ds.close()
