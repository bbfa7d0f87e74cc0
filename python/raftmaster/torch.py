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

:class:`RecordLoader` is a DataLoader over a RecordDataset whose
``state_dict()`` is the data position of the batches it has yielded (a
cursor of the job), to save with the model, and whose
``load_state_dict()`` resumes there, at any number of workers or ranks:
the records trained before the checkpoint and those read after the
restore are every record of the pass, each once::

    loader = RecordLoader(ds, batch_size=64, num_workers=4)
    loader.load_state_dict(torch.load("ckpt.pt")["data"])   # when resuming
    for batch in loader:
        ...
        torch.save({"model": model.state_dict(), "data": loader.state_dict()}, "ckpt.pt")

This module needs PyTorch (``apt-get install python3-torch`` or ``pip
install torch``); ``import raftmaster`` does not import it.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

try:
    import torch.utils.data as _data
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("raftmaster.torch needs PyTorch: apt-get install python3-torch (Debian, Ubuntu) "
                      "or pip install torch") from e

from . import errors
from ._transport import DEFAULT_JOB
from .client import CURSOR_PROTOCOL, Client, CursorInfo, TaskMeta

__all__ = ["RecordDataset", "RecordLoader"]

log = logging.getLogger("raftmaster")

#: Where a sample comes from, as RecordLoader's workers tag it: its task's
#: id and lease epoch, its offset in the task and the task's record count.
Tag = Tuple[int, int, int, int]


class RecordDataset(_data.IterableDataset):
    """The records of one pass of a job, as an ``IterableDataset``.

    ``addrs``, ``job`` and ``token``, and any other keyword the Client takes
    (``ssl_context``, ``retry``, ``client_indexing``, ``session_ttl``) in
    ``client_options``,
    say how to reach the cluster. ``paths`` are glob patterns of the RecordIO
    files, set as the job's dataset by every trainer (the first one counts)
    with ``dataset_options`` (``chunks_per_task``, ``task_timeout``,
    ``failure_max``, ``strict``, ``seed``, ``shuffle``); leave them out when
    the dataset is set elsewhere. ``transform`` turns a record (bytes) into
    a sample. ``skip_damaged`` logs and skips tasks whose data cannot be
    read instead of raising ChunkError.

    Order: the cluster dispatches each pass's tasks in a permutation of
    the job's seed and the pass (unless the dataset was set with
    ``shuffle=False``), the same at any number of trainers and through any
    faults. ``shuffle_buffer`` n > 0 also shuffles the records within each
    task through a buffer of n records, with a ``random.Random`` seeded
    from the job's seed, the pass and the task's id, so that the order is
    reproducible and a cursor restored at another number of workers
    resumes it (see Client.records); 0, the default, keeps the records of
    a task in file order. Give every trainer of a job the same
    ``shuffle_buffer``.

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
                 client_options: Optional[Dict[str, Any]] = None, shuffle_buffer: int = 0) -> None:
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
        if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or shuffle_buffer < 0:
            raise ValueError("RecordDataset: shuffle_buffer %r: want an integer >= 0" % (shuffle_buffer,))
        self.shuffle_buffer = shuffle_buffer
        self.client_options = dict(client_options or {})
        self._client: Optional[Client] = None
        self._client_pid = 0
        self._dataset_set = False
        self._epoch_set = False
        # Set by RecordLoader: yield (tag, sample) pairs and leave the
        # tasks read to be reported finished by the loader's main process.
        self._tagged = False

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
        tagged = self._tagged
        records = c.records(pass_id, skip_damaged=self.skip_damaged, finish=not tagged,
                            shuffle_buffer=self.shuffle_buffer)
        with records:
            for rec in records:
                sample = self.transform(rec) if self.transform is not None else rec
                if tagged:
                    meta, offset, count = records.last  # type: ignore[misc]
                    yield (meta.id, meta.epoch, offset, count), sample
                else:
                    yield sample
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


class _TagCollate:
    """The collate_fn of a RecordLoader: it takes the tags off the samples
    and collates the samples with the user's collate_fn, or torch's
    default, so that the tags reach the main process beside the batch."""

    def __init__(self, collate_fn: Optional[Callable[[Any], Any]], batched: bool) -> None:
        self.collate_fn = collate_fn
        self.batched = batched

    def __call__(self, data: Any) -> Tuple[List[Tag], Any]:
        if self.batched:
            tags = [d[0] for d in data]
            samples = [d[1] for d in data]
            return tags, (self.collate_fn or _data.default_collate)(samples)
        tag, sample = data
        return [tag], (self.collate_fn or _data.default_convert)(sample)


class RecordLoader(_data.DataLoader):
    """A DataLoader over a :class:`RecordDataset` whose state is the data
    position of the batches it has yielded: torch's Stateful protocol,
    ``state_dict()`` and ``load_state_dict(state)``, with the state
    ``{"job": job, "cursor": id}``, a cursor of the job (see
    Client.commit_cursor) to save with the model.

    ``dataset`` is the RecordDataset, which the loader then owns (its
    iteration yields tagged samples); every other keyword is the
    DataLoader's (``batch_size``, ``num_workers``, ``collate_fn``,
    ``pin_memory``, ``prefetch_factor``, ``persistent_workers``...), but
    ``drop_last``, which would leave the records of the batches it drops
    neither trained nor handed back.

    A record is consumed once the batch that holds it is yielded to the
    training loop; the records the workers have read ahead, in batches not
    yet yielded, are not. Each process that reads is a trainer of its own,
    which leases tasks (the main process with ``num_workers=0``, else each
    worker, under its client's session), and each sample carries its task
    and offset through collate_fn to the main process, which counts what
    was consumed and reports a task finished once the batch that holds its
    last record is yielded. (A worker that runs without a session, with
    ``session_ttl=0``, stops renewing a task once it has read it: it comes
    back after its lease if the main process does not finish it first. A
    held task's progress does not grow while the main process works
    through the batches read ahead: the job's task timeout must exceed the
    time that takes.)

    One process: ``state_dict()`` commits a cursor with the consumed
    offset of every task in flight and returns its state;
    ``load_state_dict(state)``, before iterating, restores it: the job's
    dispatch goes back to the cursor, and the iteration reads the rest of
    the cursor's pass (``pass_id``; then the passes after it).

    Several ranks (DDP), each with a RecordLoader of the same job: at a
    checkpoint, every rank calls ``report_progress()``, then a barrier;
    rank 0 calls ``commit_cursor()`` and broadcasts the cursor's id; every
    rank saves ``state_dict(cursor=id)``, which commits nothing. To resume,
    rank 0 calls ``load_state_dict(state)``, which restores the cursor,
    then a barrier, and every other rank calls ``load_state_dict(state,
    restore=False)``, which only reads the cursor's pass; then all
    iterate. A restore revokes every lease of the job: no rank may read
    before it, nor restore once another rank reads.
    """

    def __init__(self, dataset: RecordDataset, **options: Any) -> None:
        if not isinstance(dataset, RecordDataset):
            raise TypeError("RecordLoader reads a RecordDataset, not %s" % type(dataset).__name__)
        if options.get("drop_last"):
            raise ValueError("RecordLoader: drop_last would leave the records of the dropped batches neither "
                             "trained nor handed back: leave it out")
        collate = options.pop("collate_fn", None)
        batched = options.get("batch_size", 1) is not None
        dataset._tagged = True
        super().__init__(dataset, collate_fn=_TagCollate(collate, batched), **options)
        #: The training step the loader is at: the step of the cursor
        #: restored, plus the batches yielded since; the default label of
        #: the cursors it commits.
        self.step = 0
        self._records: RecordDataset = dataset
        self._lock = threading.Lock()
        # The tasks in flight: (id, epoch) -> [consumed offset, record count].
        self._inflight: Dict[Tuple[int, int], List[int]] = {}
        self._generation = 0
        self._active = 0
        self._protocol_ok = False

    @property
    def job(self) -> str:
        """The job the loader reads."""
        return self._records.job or DEFAULT_JOB

    @property
    def pass_id(self) -> int:
        """The pass the next iteration reads."""
        return self._records.pass_id

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration read pass ``epoch`` (RecordDataset.set_epoch)."""
        self._records.set_epoch(epoch)

    def client(self) -> Client:
        """The main process's Client, which commits and restores cursors
        and reports the tasks consumed finished."""
        return self._records.client()

    def _cursors(self) -> Client:
        """The main process's Client, once the cluster is seen to have
        cursors: a cluster below their protocol level would answer
        Unavailable for the client's whole retry budget."""
        c = self.client()
        if not self._protocol_ok:
            level = c.protocol()
            if level < CURSOR_PROTOCOL:
                raise errors.Unavailable("the cluster is at protocol level %d, and cursors need %d: every node "
                                         "must run a release that has them" % (level, CURSOR_PROTOCOL))
            self._protocol_ok = True
        return c

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        start = self._records.pass_id
        return self._yield(super().__iter__(), start)

    def _yield(self, it: Any, start: int) -> Iterator[Any]:
        self._active += 1
        try:
            for tags, batch in it:
                self._consumed(tags)
                self.step += 1
                yield batch
            # Workers read a copy of the dataset: move the loader's own on.
            self._records.pass_id = max(self._records.pass_id, start + 1)
        finally:
            self._active -= 1
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None and not self.persistent_workers:
                shutdown()

    def _consumed(self, tags: Sequence[Sequence[int]]) -> None:
        """Count the records of a batch yielded as consumed, and report
        finished the tasks whose last record it holds."""
        done = []
        with self._lock:
            for tag in tags:
                tid, epoch, offset, count = (int(v) for v in tag)
                key = (tid, epoch)
                entry = self._inflight.setdefault(key, [0, count])
                if offset + 1 > entry[0]:
                    entry[0] = offset + 1
                if entry[0] >= count and key not in done:
                    done.append(key)
        if not done:
            return
        c = self.client()
        for key in done:
            try:
                c.task_finished(TaskMeta(*key))
            except errors.ClientClosed:
                raise
            except errors.RaftmasterError as e:
                # Its consumed offset, its record count, still counts it
                # finished in the next cursor.
                log.warning("task %d epoch %d: cannot report it finished: %s", key[0], key[1], e)
                continue
            with self._lock:
                self._inflight.pop(key, None)

    def progress(self) -> List[Dict[str, Any]]:
        """The consumed offset of each task in flight in the batches
        yielded, as Client.commit_cursor and Client.report_progress take
        them."""
        with self._lock:
            return [{"meta": {"id": k[0], "epoch": k[1]}, "consumed": v[0]} for k, v in self._inflight.items()]

    def report_progress(self) -> int:
        """Report the consumed offsets of this loader's tasks in flight to
        the job, for the cursor another rank commits; return how many were
        recorded (those of tasks still leased)."""
        p = self.progress()
        if not p:
            return 0
        return self._cursors().report_progress(p)

    def commit_cursor(self, step: Optional[int] = None, trainer_id: Optional[str] = None) -> CursorInfo:
        """Commit a cursor of the job with this loader's consumed offsets
        and those other ranks reported, labelled ``step`` (the loader's
        ``step`` by default); ``trainer_id`` fences it with the save-model
        lease. After a restore by this loader, a commit is refused
        (CursorFenced) once the job was restored again by anyone else."""
        return self._cursors().commit_cursor(self.step if step is None else step, progress=self.progress(),
                                             trainer_id=trainer_id, generation=self._generation or None)

    def state_dict(self, cursor: Optional[int] = None) -> Dict[str, Any]:  # type: ignore[override]
        """The data position of the batches yielded so far, to save with
        the model: ``{"job": job, "cursor": id}``. It commits the cursor
        (commit_cursor), unless ``cursor`` names one already committed (by
        rank 0, for every rank)."""
        if cursor is None:
            cursor = self.commit_cursor().id
        return {"job": self.job, "cursor": int(cursor)}

    def load_state_dict(self, state: Dict[str, Any], restore: bool = True) -> None:  # type: ignore[override]
        """Resume at a state that state_dict returned, before iterating:
        restore its cursor (Client.restore_cursor) and make the iteration
        read the cursor's pass, only what the cursor did not count as
        trained. With ``restore`` False it only reads the cursor's pass and
        step: for every rank but the one that restores."""
        if self._active or getattr(self, "_iterator", None) is not None:
            raise RuntimeError("RecordLoader: load_state_dict after the iteration started")
        try:
            job, cursor = state["job"], int(state["cursor"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("RecordLoader: a state is {\"job\": ..., \"cursor\": id}, not %r" % (state,)) from e
        if job != self.job:
            raise ValueError("RecordLoader: the state is of job %r, and the loader reads job %r" % (job, self.job))
        c = self._cursors()
        if restore:
            r = c.restore_cursor(cursor)
            info, self._generation = r.cursor, r.generation
        else:
            info = c.cursor(cursor).cursor
        with self._lock:
            self._inflight.clear()
        self.step = info.step
        self._records.set_epoch(info.pass_id)

    def close(self) -> None:
        """Close the main process's Client (RecordDataset.close)."""
        self._records.close()
