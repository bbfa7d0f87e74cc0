"""raftmaster: the Python client of a raftmaster cluster.

A raftmaster cluster is the fault-tolerant master of distributed training
jobs: it dispatches RecordIO datasets to trainers as leased tasks, one pass
after another, grants the save-model lease to one trainer at a time, and
runs allgather rendezvous. This package is its client (:class:`Client`), a
RecordIO reader and writer (:mod:`raftmaster.recordio`), a PyTorch dataset
over a pass (:mod:`raftmaster.torch`) and a torchrun rendezvous backend
(:mod:`raftmaster.torch_rendezvous`, started by ``python -m
raftmaster.torchrun``); those two import torch, and only when used.

    import raftmaster

    with raftmaster.Client(["n1:8001", "n2:8001", "n3:8001"], job="resnet") as c:
        c.set_dataset(["/data/train-*.recordio"])
        for rec in c.records(pass_id=0):
            train(rec)
"""

from .client import (CURSOR_PROTOCOL, DEFAULT_KV_WATCH_TIMEOUT, DEFAULT_SESSION_TTL, DEFAULT_TIMEOUT,
                     KV_STORE_PROTOCOL, MAX_PROGRESS, MAX_TASKS_PER_GET, MIXTURE_PROTOCOL, SESSION_PROTOCOL,
                     SHUFFLE_PROTOCOL,
                     AllgatherResult, Chunk, Client, CursorDetail, CursorInfo, CursorList, CursorTask, DatasetResult,
                     KVDeleteResult, KVResult, KVValue, KVWatchResult, Mixture, RestoreResult, SaveModelGrant,
                     SourceStatus, Task, TaskMeta, WeightStep, close_recorded_sessions)
from .errors import (AllGatherTimeoutExceeded, AllTaskFailed, ChunkError, ClientClosed, Closed, CursorFenced,
                     FinishOutcome, Forbidden, ForeignClient, GroupMismatch, Internal, Invalid, LimitExceeded,
                     MethodNotAllowed, NoContact, NoDataset, NoLeader, NoMoreAvailable, NotFound, NotLeader, PassAfter,
                     PassBefore, RaftmasterError, RateLimited, Reconnected, SessionExpired, StaleEpoch, TooLarge,
                     TooManyClients, TransportError, Unauthorized, Unavailable, UnknownClient, UnknownCursor,
                     UnknownJob, UnknownOutcome, UnknownTask, UpgradePending)
from .records import PassRecords

__version__ = "0.1.0"

__all__ = [
    "Client", "Task", "TaskMeta", "Chunk", "FinishOutcome", "DatasetResult", "SaveModelGrant", "AllgatherResult",
    "KVValue", "KVResult",
    "KVDeleteResult", "KVWatchResult", "PassRecords", "close_recorded_sessions",
    "CursorInfo", "CursorTask", "CursorDetail", "CursorList", "RestoreResult", "Mixture", "SourceStatus", "WeightStep",
    "DEFAULT_TIMEOUT", "MAX_TASKS_PER_GET",
    "DEFAULT_KV_WATCH_TIMEOUT", "KV_STORE_PROTOCOL", "DEFAULT_SESSION_TTL", "SESSION_PROTOCOL",
    "CURSOR_PROTOCOL", "SHUFFLE_PROTOCOL", "MIXTURE_PROTOCOL", "MAX_PROGRESS",
    "RaftmasterError", "PassBefore", "PassAfter", "NoMoreAvailable", "AllTaskFailed", "NoDataset", "UnknownTask",
    "StaleEpoch", "Closed", "Reconnected", "AllGatherTimeoutExceeded", "GroupMismatch", "Invalid",
    "LimitExceeded", "UnknownJob", "UnknownClient", "TooManyClients", "NotLeader", "NoLeader", "UnknownOutcome",
    "Unavailable", "TooLarge",
    "NotFound", "MethodNotAllowed", "Internal", "Unauthorized", "Forbidden", "ForeignClient", "SessionExpired",
    "RateLimited", "UnknownCursor", "CursorFenced", "UpgradePending",
    "ClientClosed", "TransportError", "NoContact",
    "ChunkError",
]
