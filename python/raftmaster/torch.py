"""PyTorch datasets over the passes of a raftmaster job.

:class:`RecordDataset` is an ``IterableDataset``: one iteration reads one
pass of the job's dataset. Every process that iterates it (the main process,
or each DataLoader worker) is a trainer of its own, with a Client of its
own made there on first use (and so a session of its own, which holds its
tasks while it lives), and the cluster leases each task of a pass to
one trainer only, so the workers of every rank together read each record of
the pass exactly once::

    from torch.utils.data import DataLoader
    from raftmaster.torch import RecordDataset

    ds = RecordDataset(["n1:8001", "n2:8001", "n3:8001"], job="resnet",
                       paths=["/data/train-*.recordio"], transform=decode)
    loader = DataLoader(ds, batch_size=64, num_workers=4)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            ...

This module needs PyTorch (``apt-get install python3-torch`` or ``pip
install torch``); ``import raftmaster`` does not import it.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

try:
    import torch.utils.data as _data
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("raftmaster.torch needs PyTorch: apt-get install python3-torch (Debian, Ubuntu) "
                      "or pip install torch") from e

from . import errors
from .client import Client

__all__ = ["RecordDataset"]


class RecordDataset(_data.IterableDataset):
    """The records of one pass of a job, as an ``IterableDataset``.

    ``addrs``, ``job`` and ``token``, and any other keyword the Client takes
    (``ssl_context``, ``retry``, ``client_indexing``, ``session_ttl``) in
    ``client_options``,
    say how to reach the cluster. ``paths`` are glob patterns of the RecordIO
    files, set as the job's dataset by every trainer (the first one counts)
    with ``dataset_options`` (``chunks_per_task``, ``task_timeout``,
    ``failure_max``, ``strict``); leave them out when the dataset is set
    elsewhere. ``transform`` turns a record (bytes) into a sample.
    ``skip_damaged`` logs and skips tasks whose data cannot be read instead
    of raising ChunkError.

    Passes: an iteration reads pass ``pass_id`` (0 at first); call
    ``set_epoch(epoch)`` before each epoch to read pass ``epoch``, as with a
    DistributedSampler. After an iteration the iterated object moves on to
    the next pass by itself, which is enough when the main process iterates
    it (``num_workers=0``) or the workers are persistent
    (``persistent_workers=True``); with other workers, which get a fresh copy
    of the dataset every epoch, call ``set_epoch``.
    """

    def __init__(self, addrs: Union[str, Sequence[str]], job: Optional[str] = None, token: Optional[str] = None, *,
                 paths: Optional[Sequence[str]] = None, dataset_options: Optional[Dict[str, Any]] = None,
                 transform: Optional[Callable[[bytes], Any]] = None, pass_id: int = 0, skip_damaged: bool = False,
                 client_options: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        self.addrs = addrs if isinstance(addrs, str) else list(addrs)
        self.job = job
        self.token = token
        self.paths: Optional[List[str]] = [paths] if isinstance(paths, str) else (
            list(paths) if paths is not None else None)
        self.dataset_options = dict(dataset_options or {})
        self.transform = transform
        self.pass_id = pass_id
        self.skip_damaged = skip_damaged
        self.client_options = dict(client_options or {})
        self._client: Optional[Client] = None
        self._client_pid = 0
        self._dataset_set = False
        self._epoch_set = False

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration read pass ``epoch``."""
        self.pass_id = epoch
        self._epoch_set = True

    def _pass_over(self, c: Client, pass_id: int) -> str:
        """Why pass pass_id gave this trainer nothing: the job is past it."""
        job = self.job or "default"
        at = ""
        try:
            current = c.status(stale=True).get("fsm", {}).get("pass")
            if isinstance(current, int):
                at = " (the job is at pass %d)" % current
        except errors.RaftmasterError:
            pass
        msg = ("raftmaster: pass %d of job %r was over before this trainer asked for it%s: other trainers, or an "
               "earlier run of this job, read it. A job's passes run once: to train from pass 0 again, use a new "
               "job name, or delete the job first (raftmaster job delete %s)" % (pass_id, job, at, job))
        if not self._epoch_set:
            # Workers that get a fresh copy every epoch read pass 0 again.
            msg += "; if every epoch after the first is empty, call set_epoch(epoch) before each epoch"
        return msg

    def client(self) -> Client:
        """This process's Client, made on first use: each DataLoader worker
        is a trainer of its own."""
        if self._client is None or self._client_pid != os.getpid():
            # A client inherited from the parent through fork shares its
            # connections: make a new one.
            self._client = Client(self.addrs, job=self.job, token=self.token, **self.client_options)
            self._client_pid = os.getpid()
            self._dataset_set = False
        return self._client

    def __iter__(self) -> Iterator[Any]:
        c = self.client()
        if self.paths and not self._dataset_set:
            c.set_dataset(self.paths, **self.dataset_options)
            self._dataset_set = True
        pass_id = self.pass_id
        self.pass_id += 1
        records = c.records(pass_id, skip_damaged=self.skip_damaged)
        with records:
            for rec in records:
                yield self.transform(rec) if self.transform is not None else rec
        if isinstance(records.end, errors.PassBefore) and records.tasks == 0:
            warnings.warn(self._pass_over(c, pass_id), RuntimeWarning, stacklevel=2)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        state["_client_pid"] = 0
        state["_dataset_set"] = False
        return state

    def close(self) -> None:
        """Close this process's Client, if it made one."""
        if self._client is not None and self._client_pid == os.getpid():
            self._client.close()
        self._client = None
