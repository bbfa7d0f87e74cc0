"""Sessions (protocol level 6): the client's rules against a fake server,
then the sessions of a real cluster: held tasks, keep-alives, close,
expiry, attached keys and the torchrun agent's closing of its workers'
sessions."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from datetime import timedelta

import pytest

import raftmaster
from raftmaster import _session, _transport
from cluster import REPO, wait_until
from test_transport import TASK, recording_waits

HELD = dict(TASK, task=dict(TASK["task"], session=7))


class FakeSessions:
    """The session calls of a fake cluster: ids from 7 on, open until closed or expired."""

    def __init__(self, ttl="5s"):
        self.ttl = ttl
        self.next = 7
        self.open = set()
        self.lock = threading.Lock()

    def __call__(self, method, path):
        with self.lock:
            if method == "POST" and path == "/v1/sessions":
                sid, self.next = self.next, self.next + 1
                self.open.add(sid)
                return 200, {}, {"session": sid, "ttl": self.ttl, "applied_at": "2026-01-01T00:00:00Z"}
            m = re.match(r"^/v1/sessions/(\d+)(/keepalive)?$", path)
            assert m, path
            sid = int(m.group(1))
            if m.group(2):
                if sid not in self.open:
                    return 410, {}, {"code": "session_expired", "message": "the session has expired"}
                return 200, {}, {"ttl": self.ttl}
            closed = sid in self.open
            self.open.discard(sid)
            return 200, {}, {"closed": closed}

    def expire(self, sid):
        with self.lock:
            self.open.discard(sid)


def lane_of(request):
    return request["headers"][_transport.HEADER_REQUEST_ID].split("/")[0]


def keepalives(s):
    return [r for r in list(s.session_requests) if r["path"].endswith("/keepalive")]


def test_a_session_opens_at_the_first_write_and_every_write_carries_it(fake, clients):
    sessions = FakeSessions()
    s = fake([(200, {}, TASK)], sessions)
    c = clients([s.addr], retry=5)
    assert c.session_id is None
    c.status()
    c.set_dataset(["/data/*"])  # not under a session, which the cluster refuses
    assert s.session_requests == [] and c.session_id is None
    assert lane_of(s.requests[-1]) == str(c.id) and _transport.HEADER_SESSION not in s.requests[-1]["headers"]
    c.get_task(0)
    c.get_task(0)
    assert c.session_id == 7
    opening = s.session_requests[0]
    assert (opening["method"], opening["path"], json.loads(opening["body"])) == ("POST", "/v1/sessions", {"ttl": "5s"})
    # The opening is made under an identity of its own, the writes under
    # the session's, which are bound to it.
    assert lane_of(opening) == str(uuid.uuid5(c.id, "open/1"))
    assert _transport.HEADER_SESSION not in opening["headers"]
    writes = [r for r in s.requests if r["path"].endswith("/task/get")]
    assert [r["headers"][_transport.HEADER_SESSION] for r in writes] == ["7", "7"]
    assert {lane_of(r) for r in writes} == {str(uuid.uuid5(c.id, "session/7"))}
    assert "X-Raftmaster-Session" not in s.requests[0]["headers"]  # the status read
    session = c._sessions._current
    c.close()
    closing = [r for r in s.session_requests if r["method"] == "DELETE"]
    assert [r["path"] for r in closing] == ["/v1/sessions/7"]
    assert closing[0]["headers"][_transport.HEADER_REQUEST_ID] == "%s/2" % uuid.uuid5(c.id, "open/1")
    assert sessions.open == set() and c.session_id is None
    wait_until(lambda: not session.thread.is_alive(), "the keep-alive thread to stop", timeout=10)


def test_the_keepalives_carry_the_progress_of_held_tasks(fake, clients):
    s = fake([(200, {}, HELD)], FakeSessions(ttl="1s"))
    c = clients([s.addr], retry=5, session_ttl=1)
    t = c.get_task(0)
    assert t.session == 7 and t.meta == raftmaster.TaskMeta(3, 1)
    assert json.loads(s.session_requests[0]["body"]) == {"ttl": "1s"}
    c.report_progress(t, 12)
    want = [{"job": "default", "task": 3, "epoch": 1, "records": 12}]
    wait_until(lambda: any(json.loads(r["body"] or b"{}").get("progress") == want for r in keepalives(s)),
               "a keep-alive with the task's progress", timeout=20)
    # A finished task is no longer reported.
    c.task_finished(t)
    seen = len(keepalives(s))
    wait_until(lambda: any("progress" not in json.loads(r["body"] or b"{}") for r in keepalives(s)[seen + 1:]),
               "a keep-alive without progress", timeout=20)


def test_a_call_under_an_ended_session_raises_and_the_next_opens_another(fake, clients):
    expired = (410, {}, {"code": "session_expired", "message": "the session has expired"})
    s = fake([(200, {}, TASK), expired, (200, {}, TASK)], FakeSessions())
    c = clients([s.addr], retry=5)
    c.get_task(0)
    assert c.session_id == 7
    with pytest.raises(raftmaster.SessionExpired) as e:
        c.get_task(0)
    assert e.value.status == 410 and c.session_id is None
    c.get_task(0)
    assert c.session_id == 8
    last = s.requests[-1]
    assert last["headers"][_transport.HEADER_SESSION] == "8"
    assert lane_of(last) == str(uuid.uuid5(c.id, "session/8"))


def test_a_keepalive_refused_as_expired_ends_the_session(fake, clients):
    sessions = FakeSessions(ttl="1s")
    s = fake([(200, {}, TASK)], sessions)
    c = clients([s.addr], retry=5, session_ttl=1)
    c.get_task(0)
    sessions.expire(7)
    wait_until(lambda: c.session_id is None, "the client to see its session ended", timeout=20)
    c.get_task(0)
    assert c.session_id == 8


def test_a_cluster_without_sessions_is_asked_again_later(fake, clients):
    s = fake([(200, {}, TASK)])
    c = clients([s.addr], retry=5)
    c.get_task(0)
    c.get_task(0)
    assert c.session_id is None and len(s.session_requests) == 1
    assert all(_transport.HEADER_SESSION not in r["headers"] for r in s.requests)
    c._sessions._ask_at = 0.0  # a minute later
    c.get_task(0)
    assert len(s.session_requests) == 2


def test_a_cluster_not_upgraded_yet_is_not_waited_for(fake, clients):
    message = "the cluster is not upgraded yet: open session needs protocol level 6"
    pending = (503, {"Retry-After": "1"}, {"code": "unavailable", "message": message})
    s = fake([(200, {}, TASK)], lambda method, path: pending)
    c = clients([s.addr], retry=60)
    waits = recording_waits(c)
    c.get_task(0)
    assert len(s.session_requests) == 1 and waits == [] and c.session_id is None
    assert _transport.HEADER_SESSION not in s.requests[0]["headers"]


def test_session_ttl(fake, clients):
    s = fake([(200, {}, TASK)], FakeSessions())
    clients([s.addr], session_ttl=None).get_task(0)
    clients([s.addr], session_ttl=timedelta(seconds=90)).get_task(0)
    assert [json.loads(r["body"]) for r in s.session_requests] == [{}, {"ttl": "1m30s"}]
    for off in (0, False, 0.0):
        clients([s.addr], session_ttl=off).get_task(0)
    assert len(s.session_requests) == 2
    for bad in (0.5, -1, 7201):
        with pytest.raises(ValueError):
            raftmaster.Client([s.addr], session_ttl=bad)
    with pytest.raises(TypeError):
        raftmaster.Client([s.addr], session_ttl=True)


def test_attach_needs_a_session(fake, clients):
    s = fake([(200, {}, {"versions": [1]})], FakeSessions())
    clients([s.addr], job="j").kv_multi_set({"k": b"v"}, attach=True)
    clients([s.addr], job="j", session_ttl=0).kv_multi_set({"k": b"v"}, attach=True)
    assert [r["path"] for r in s.requests] == ["/v1/jobs/j/kv/multi-set?attach=true", "/v1/jobs/j/kv/multi-set"]
    assert s.requests[0]["headers"][_transport.HEADER_SESSION] == "7"


def test_the_session_is_recorded_for_a_supervisor(fake, clients, tmp_path, monkeypatch):
    sessions = FakeSessions()
    s = fake([(200, {}, TASK)], sessions)
    monkeypatch.setenv(_session.SESSION_DIR_ENV, str(tmp_path))
    a = clients([s.addr])
    b = clients([s.addr])
    off = clients([s.addr], session_dir="")
    for c in (a, b, off):
        c.get_task(0)
    assert sorted(os.listdir(tmp_path)) == ["7.session", "8.session"]
    with open(tmp_path / "7.session") as f:
        assert json.load(f) == {"session": 7, "pid": os.getpid(), "job": "default"}
    a.close()
    assert os.listdir(tmp_path) == ["8.session"]
    # The supervisor closes what is recorded, and forgets it.
    (tmp_path / "x.session").write_text("")
    supervisor = clients([s.addr], session_ttl=0)
    assert raftmaster.close_recorded_sessions(supervisor, str(tmp_path)) == [8]
    assert sessions.open == {9} and os.listdir(tmp_path) == ["x.session"]
    assert supervisor.close_session(9) and not supervisor.close_session(9)


# A real cluster's sessions.

def _dataset(c, paths, **kw):
    kw.setdefault("chunks_per_task", 10)
    kw.setdefault("task_timeout", 600)
    return c.set_dataset(paths, **kw).tasks


def _all_tasks(c, n, timeout=30.0):
    """Lease every task of pass 0 with c, waiting for those that come back; return their ids."""
    got = set()

    def more():
        try:
            got.add(c.get_task(0).meta.id)
        except raftmaster.NoMoreAvailable:
            pass
        return len(got) == n
    wait_until(more, "%d tasks" % n, timeout=timeout, every=0.1)
    return got


def test_a_held_task_is_not_renewed_and_comes_back_at_close(make_client, proxies, session_cluster, dataset):
    paths, recs = dataset
    p = proxies(session_cluster.leader())
    reader, other = make_client([p.addr], session_ttl=1), make_client(session_ttl=0)
    n = _dataset(reader, paths)
    assert reader.session_id is None  # a dataset is not set under a session
    it = reader.records(0)
    next(it)
    assert reader.session_id is not None
    answer = json.loads(p.seen("/task/get")[0]["body"])
    assert answer["task"]["session"] == reader.session_id
    # Several keep-alives carry its progress; no renewal is sent.
    wait_until(lambda: len(p.seen("/keepalive")) >= 4, "keep-alives", timeout=30)
    assert p.seen("/task/renew") == []
    listed = {s["session"]: s for s in other.sessions()}
    assert [t["meta"]["id"] for t in listed[reader.session_id].get("tasks") or []] == [answer["task"]["meta"]["id"]]
    # Closed, the client hands its task back at once, far within its lease.
    reader.close()
    assert len(_all_tasks(other, n)) == n


def test_a_dead_client_s_task_comes_back_after_its_ttl(make_client, session_cluster, job, dataset):
    paths, _ = dataset
    other = make_client(session_ttl=0)
    n = _dataset(other, paths)
    script = ("import os, sys, raftmaster\n"
              "c = raftmaster.Client(sys.argv[1].split(','), job=sys.argv[2], session_ttl=1)\n"
              "t = c.get_task(0)\n"
              "print(t.meta.id, t.session, flush=True)\n"
              "sys.stdin.read()\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    env.pop(_session.SESSION_DIR_ENV, None)
    proc = subprocess.Popen([sys.executable, "-c", script, ",".join(session_cluster.addrs), job], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        task_id, session = (int(v) for v in proc.stdout.readline().split())
        assert session > 0
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    # Its keep-alives stopped: the task comes back after the TTL (its lease
    # of ten minutes would be far longer).
    assert task_id in _all_tasks(other, n, timeout=60)


def test_an_expired_session_raises_and_a_new_one_opens(make_client, session_cluster):
    c, other = make_client(session_ttl=1), make_client(session_ttl=0)
    c._sessions._keep = lambda s: None  # the keep-alives stop
    c.kv_multi_set({"a": b"1"}, attach=True)
    first = c.session_id
    assert first is not None and other.kv_get("a").found
    wait_until(lambda: first not in {s["session"] for s in other.sessions()}, "the session to expire", timeout=60)
    assert not other.kv_get("a").found
    with pytest.raises(raftmaster.SessionExpired):
        c.kv_multi_set({"b": b"2"})
    assert c.session_id is None and not other.kv_get("b").found
    c.kv_multi_set({"b": b"2"})
    assert c.session_id not in (None, first) and other.kv_get("b").found


def test_attached_keys_vanish_when_the_session_closes(make_client, session_cluster):
    c, other = make_client(session_ttl=2), make_client(session_ttl=0)
    c.kv_multi_set({"attached": b"1"}, attach=True)
    c.kv_add("counter", 3, attach=True)
    c.kv_cas("plain", 0, b"stays")
    listed = {s["session"]: s for s in other.sessions()}
    assert listed[c.session_id]["keys"] == 2
    c.close()
    assert [other.kv_get(k).found for k in ("attached", "counter", "plain")] == [False, False, True]


def test_the_agent_closes_its_stopped_workers_sessions(make_client, session_cluster, job, dataset, monkeypatch):
    pytest.importorskip("torch")
    from raftmaster.torch_rendezvous import WorkerSessions
    monkeypatch.delenv(_session.SESSION_DIR_ENV, raising=False)
    paths, _ = dataset
    agent = make_client(session_ttl=0)
    n = _dataset(agent, paths)
    ws = WorkerSessions(agent)
    try:
        assert os.environ[_session.SESSION_DIR_ENV] == ws.directory
        # A worker, whose environment is the agent's, leases a task and stops.
        worker = make_client(session_ttl=60)
        worker._sessions._keep = lambda s: None  # it is stopped: no keep-alives, no close
        t = worker.get_task(0)
        assert os.listdir(ws.directory) == ["%d.session" % t.session]
        assert ws.close_all() == [t.session]
        assert os.listdir(ws.directory) == []
        # Its task is back at once, not after its TTL of a minute.
        assert t.meta.id in _all_tasks(agent, n, timeout=30)
    finally:
        ws.finish()
    assert not os.path.exists(ws.directory) and os.environ.get(_session.SESSION_DIR_ENV) is None
