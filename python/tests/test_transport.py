"""The transport's rules: request ids reused by retries, redirects to the
leader, unreachable nodes, Retry-After and backoff, and the mapping of wire
codes to exception classes."""

import http.server
import json
import os
import socketserver
import threading
import uuid

import pytest

import raftmaster
from raftmaster import _transport, errors
from cluster import REPO, free_ports


def test_a_lost_answer_is_retried_with_the_same_request_id_and_gets_the_first_outcome(
        make_client, proxies, cluster, dataset):
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    paths, _ = dataset
    c.set_dataset(paths, chunks_per_task=10, shuffle=False)  # in id order: the next task is the next id
    p.drop("/task/get")
    task = c.get_task(0)
    sent = p.seen("/task/get")
    assert len(sent) == 2 and len(p.dropped) == 1
    ids = [r["headers"][_transport.HEADER_REQUEST_ID] for r in sent]
    # The client's own identity, or its session's.
    lane = str(uuid.uuid5(c.id, "session/%d" % c.session_id) if c.session_id else c.id)
    assert ids[0] == ids[1] and ids[0].startswith(lane + "/")
    # The first, lost answer is the one the retry got: the same lease, not a second one.
    first = json.loads(p.dropped[0]["body"])
    assert sent[0]["status"] == sent[1]["status"] == 200
    assert (first["task"]["meta"]["id"], first["task"]["meta"]["epoch"]) == (task.meta.id, task.meta.epoch)
    assert first["applied_at"] == task.applied_at
    # Nothing else was leased: the next task is the next one.
    assert c.get_task(0).meta.id == task.meta.id + 1

    # The same holds for a report: a lost task_finished is applied once.
    p.drop("/task/finished")
    c.task_finished(task.meta)
    fin = p.seen("/task/finished")
    assert len(fin) == 2 and fin[0]["headers"][_transport.HEADER_REQUEST_ID] == fin[1]["headers"][
        _transport.HEADER_REQUEST_ID]
    # A new write gets the next sequence number.
    seqs = [int(r["headers"][_transport.HEADER_REQUEST_ID].split("/")[1]) for r in p.requests
            if r["headers"].get(_transport.HEADER_REQUEST_ID, "").startswith(lane + "/")]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) - 2


def test_a_follower_redirects_to_the_leader(make_client, proxies, cluster, dataset):
    p = proxies(cluster.follower())
    c = make_client([p.addr])
    paths, _ = dataset
    c.set_dataset(paths)
    assert [r["status"] for r in p.seen("/dataset")] == [307]
    leader = cluster.leader()
    assert c.leader == "http://" + leader
    # Later calls go to the leader directly.
    c.get_task(0)
    assert p.seen("/task/get") == []


def test_a_follower_s_redirect_to_the_leader_it_reports_takes_the_token(make_client, proxies, cluster, dataset):
    p = proxies(cluster.follower())
    # No session: its opening would be the first write redirected.
    c = make_client([p.addr], token="a-token-of-the-client-0123", session_ttl=0)
    paths, _ = dataset
    c.set_dataset(paths)
    assert c.leader == "http://" + cluster.leader()
    # The follower was asked who leads before the token went there.
    assert [r["path"] for r in p.requests][:2] == ["/v1/jobs/%s/dataset" % c.job, "/v1/status?stale"]


def test_the_token_goes_only_to_the_cluster_s_hosts(fake):
    """A node that redirects to a host that is neither an address the
    client was given nor the leader the cluster reports: the token is not
    sent there, and the call fails saying why."""
    third = fake([(200, {}, TASK)])
    redirector = fake([(307, {"Location": "http://%s/v1/task/get" % third.addr}, b"")])
    c = raftmaster.Client([redirector.addr], token="a-token-of-the-client-0123", retry=0.3)
    try:
        c.get_task(0)
        err = None
    except raftmaster.TransportError as e:
        err = e
    assert [r["headers"]["Authorization"] for r in third.requests if "Authorization" in r["headers"]] == [], \
        "the third host received the token"
    assert err is not None and "refusing the redirect" in str(err)


def test_rate_limited_is_retried_with_the_same_request_id_after_retry_after(fake):
    s = fake([(429, {"Retry-After": "2"}, {"code": "rate_limited", "message": "over this token's quota"}),
              (200, {}, TASK)])
    c = raftmaster.Client([s.addr], retry=60)
    waits = recording_waits(c)
    assert c.get_task(0).meta == raftmaster.TaskMeta(3, 1)
    ids = [r["headers"][_transport.HEADER_REQUEST_ID] for r in s.requests]
    assert len(ids) == 2 and ids[0] == ids[1]
    assert len(waits) == 1 and waits[0] >= 2.0


def test_an_unreachable_node_is_skipped_and_named(make_client, proxies, cluster, dataset):
    dead = "127.0.0.1:%d" % free_ports(1)[0]
    p = proxies(cluster.leader())
    c = make_client([dead, p.addr])
    paths, _ = dataset
    c.set_dataset(paths)
    sent = p.seen("/dataset")
    assert len(sent) == 1
    assert sent[0]["headers"].get(_transport.HEADER_UNREACHABLE) == dead


def test_a_killed_leader_is_replaced(tmp_path, dataset):
    from cluster import Cluster
    c3 = Cluster(str(tmp_path / "c"), nodes=3).start()
    try:
        paths, _ = dataset
        c = raftmaster.Client(c3.addrs, retry=60)
        c.set_dataset(paths, chunks_per_task=10)
        first = c.get_task(0)
        leader = c3.leader()
        node = next(n for n in c3.nodes if n.api == leader)
        node.proc.kill()
        node.proc.wait(10)
        # The task leased before the failover is still leased afterwards.
        c.task_finished(first.meta)
        second = c.get_task(0)
        assert second.meta.id != first.meta.id
        assert c.leader != "http://" + leader
        c.close()
    finally:
        c3.stop()


NO_SESSIONS = (404, {}, {"code": "not_found", "message": "404 page not found"})


class FakeServer:
    """An HTTP server answering from a list of (status, headers, body); the
    last one repeats. The session calls (/v1/sessions...) are answered
    apart, by sessions(method, path) -> (status, headers, body), as a
    release without sessions by default, and recorded in session_requests.
    The client's leader probes (GET /v1/status?stale), which a slow
    machine may set off while an attempt is in flight, are answered apart
    too, as by a node that cannot tell, and recorded in probe_requests."""

    def __init__(self, answers, sessions=None):
        self.answers = list(answers)
        self.requests = []
        self.session_requests = []
        self.probe_requests = []
        self.sessions = sessions or (lambda method, path: NO_SESSIONS)
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                entry = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                if self.path.startswith("/v1/sessions"):
                    fake.session_requests.append(entry)
                    status, headers, out = fake.sessions(self.command, self.path)
                elif self.path == "/v1/status?stale":
                    fake.probe_requests.append(entry)
                    status, headers, out = 503, {}, {"code": "unavailable", "message": "no status here"}
                else:
                    fake.requests.append(entry)
                    status, headers, out = fake.answers.pop(0) if len(fake.answers) > 1 else fake.answers[0]
                out = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_DELETE = do_POST

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.addr = "127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


TASK = {"task": {"meta": {"id": 3, "epoch": 1}, "chunks": [], "pass": 0, "lease": "1m0s"},
        "applied_at": "2026-01-01T00:00:00Z"}


def recording_waits(c):
    """Make c's transport record the waits between attempts instead of sleeping."""
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        return True
    c._t.sleep = sleep
    return waits


def test_retry_after_and_the_same_request_id(fake):
    s = fake([(503, {"Retry-After": "1"}, {"code": "no_leader", "message": "no leader"}),
              (503, {}, {"code": "unknown_outcome", "message": "lost"}),
              (502, {}, b"bad gateway from a proxy"),
              (200, {}, TASK)])
    c = raftmaster.Client([s.addr], retry=60)
    waits = recording_waits(c)
    assert c.get_task(0).meta == raftmaster.TaskMeta(3, 1)
    ids = {r["headers"][_transport.HEADER_REQUEST_ID] for r in s.requests}
    assert len(s.requests) == 4 and len(ids) == 1
    # Retry-After is honoured (up to the backoff cap); the others back off
    # with full jitter under the exponential cap.
    assert len(waits) == 3 and waits[0] >= 1.0
    assert waits[1] <= 0.1 and waits[2] <= 0.2


def test_answers_that_asking_again_would_not_change_are_not_retried(fake):
    s = fake([(409, {}, {"code": "pass_after", "message": "pass id is after the current pass",
                         "applied_at": "2026-01-01T00:00:00Z"})])
    c = raftmaster.Client([s.addr], retry=60)
    with pytest.raises(raftmaster.PassAfter) as e:
        c.get_task(3)
    assert len(s.requests) == 1
    assert e.value.status == 409 and e.value.applied_at == "2026-01-01T00:00:00Z"
    assert str(e.value) == "pass_after: pass id is after the current pass"


def test_the_retry_budget_ends_retries(fake):
    s = fake([(503, {}, {"code": "unavailable", "message": "catching up"})])
    c = raftmaster.Client([s.addr], retry=0)
    with pytest.raises(raftmaster.Unavailable) as e:
        c.status()
    assert len(s.requests) == 1 and "giving up after 1 attempts" in str(e.value)


def test_a_refused_connection_moves_to_the_next_node_at_once(fake):
    dead = "127.0.0.1:%d" % free_ports(1)[0]
    s = fake([(200, {}, TASK)])
    c = raftmaster.Client([dead, s.addr], retry=60)
    waits = recording_waits(c)
    c.get_task(0)
    assert waits == [0.0]
    assert s.requests[0]["headers"][_transport.HEADER_UNREACHABLE] == dead
    # Every node refusing: the client backs off, and gives up with a TransportError.
    c2 = raftmaster.Client([dead], retry=0)
    with pytest.raises(raftmaster.TransportError) as e:
        c2.status()
    assert isinstance(e.value.__cause__, ConnectionRefusedError)


def test_a_bad_redirect_is_retried_and_then_reported(fake):
    s = fake([(307, {"Location": "ftp://elsewhere/"}, b"")])
    c = raftmaster.Client([s.addr], retry=0)
    with pytest.raises(raftmaster.TransportError, match="bad redirect"):
        c.get_task(0)


# Every wire code the server can send, and its class.
CODES = {
    "pass_before": (409, raftmaster.PassBefore),
    "pass_after": (409, raftmaster.PassAfter),
    "no_more_available": (409, raftmaster.NoMoreAvailable),
    "all_task_failed": (409, raftmaster.AllTaskFailed),
    "no_dataset": (409, raftmaster.NoDataset),
    "unknown_task": (404, raftmaster.UnknownTask),
    "stale_epoch": (409, raftmaster.StaleEpoch),
    "closed": (409, raftmaster.Closed),
    "reconnected": (409, raftmaster.Reconnected),
    "allgather_timeout": (409, raftmaster.AllGatherTimeoutExceeded),
    "group_mismatch": (409, raftmaster.GroupMismatch),
    "invalid": (400, raftmaster.Invalid),
    "limit_exceeded": (409, raftmaster.LimitExceeded),
    "unknown_job": (404, raftmaster.UnknownJob),
    "unknown_client": (409, raftmaster.UnknownClient),
    "too_many_clients": (503, raftmaster.TooManyClients),
    "not_leader": (503, raftmaster.NotLeader),
    "no_leader": (503, raftmaster.NoLeader),
    "unknown_outcome": (503, raftmaster.UnknownOutcome),
    "too_large": (413, raftmaster.TooLarge),
    "not_found": (404, raftmaster.NotFound),
    "method_not_allowed": (405, raftmaster.MethodNotAllowed),
    "internal": (500, raftmaster.Internal),
    "unavailable": (503, raftmaster.Unavailable),
    "unauthorized": (401, raftmaster.Unauthorized),
    "forbidden": (403, raftmaster.Forbidden),
    "foreign_client": (403, raftmaster.ForeignClient),
    "session_expired": (410, errors.SessionExpired),
    "unknown_cursor": (404, errors.UnknownCursor),
    "cursor_fenced": (409, errors.CursorFenced),
    "rate_limited": (429, raftmaster.RateLimited),
}


def test_every_wire_code_of_the_contract_has_its_class():
    with open(os.path.join(REPO, "rpc", "openapi.json")) as f:
        doc = json.load(f)
    wire = set(doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    assert wire == set(CODES), "codes in rpc/openapi.json and in this test differ"
    for code, (_, cls) in CODES.items():
        assert errors.error_class(code) is cls and cls.code == code
        assert issubclass(cls, raftmaster.RaftmasterError)
        assert cls.retryable == (code in ("not_leader", "no_leader", "unknown_outcome", "unavailable",
                                          "too_many_clients", "rate_limited"))


@pytest.mark.parametrize("code", sorted(CODES))
def test_wire_codes_raise_their_class(fake, code):
    status, cls = CODES[code]
    s = fake([(status, {}, {"code": code, "message": "the server's account"})])
    c = raftmaster.Client([s.addr], retry=0)
    with pytest.raises(cls) as e:
        c.call("/v1/task/get", {"pass": 0})
    assert e.value.code == code and e.value.status == status
    assert "the server's account" in str(e.value)


def test_an_unknown_code_and_an_answer_that_is_not_ours(fake):
    s = fake([(418, {}, {"code": "teapot", "message": "short and stout"})])
    with pytest.raises(raftmaster.RaftmasterError) as e:
        raftmaster.Client([s.addr], retry=0).status()
    assert type(e.value) is raftmaster.RaftmasterError and e.value.code == "teapot"
    s2 = fake([(500, {}, b"<html>oops</html>")])
    with pytest.raises(raftmaster.Internal, match="oops"):
        raftmaster.Client([s2.addr], retry=0).status()
    s3 = fake([(200, {}, b"{not json")])
    with pytest.raises(raftmaster.RaftmasterError, match="decoding"):
        raftmaster.Client([s3.addr], retry=60).status()
    assert len(s3.requests) == 1


def test_the_job_scoped_paths_are_those_of_the_contract():
    with open(os.path.join(REPO, "rpc", "openapi.json")) as f:
        doc = json.load(f)
    prefix = "/v1/jobs/{job}"
    scoped = {"/v1" + p[len(prefix):] for p in doc["paths"] if p.startswith(prefix + "/")} - {
        "/v1/create", "/v1/delete"}
    plain = {p for p in scoped if "{" not in p}
    assert plain == _transport.JOB_SCOPED
    for p in scoped - plain:
        assert p.startswith(_transport.JOB_SCOPED_PREFIXES), p
    assert _transport.job_path("a", "/v1/task/get") == "/v1/jobs/a/task/get"
    t = _transport.Transport(["http://127.0.0.1:1"], token=None, job="a b", ssl_context=None, retry=0)
    assert t.route("/v1/cursors/7/restore") == "/v1/jobs/a%20b/cursors/7/restore"
    assert t.route("/v1/task/progress") == "/v1/jobs/a%20b/task/progress"
    assert t.route("/v1/status") == "/v1/status"
    t.close()


def test_addresses_and_options():
    assert _transport.normalize_addr("n1:8001") == "http://n1:8001"
    assert _transport.normalize_addr(" https://n1:8443/x ") == "https://n1:8443"
    # With TLS, host:port means HTTPS and plain HTTP is refused.
    assert _transport.normalize_addr("n1:8001", tls=True) == "https://n1:8001"
    with pytest.raises(ValueError, match="plain HTTP"):
        _transport.normalize_addr("http://n1:8001", tls=True)
    for bad in ("", "ftp://n1:21", "http://"):
        with pytest.raises(ValueError):
            _transport.normalize_addr(bad)
    c = raftmaster.Client("n1:1, n2:2", job="default")
    assert c.addrs == ["http://n1:1", "http://n2:2"] and c.job is None
    with pytest.raises(ValueError):
        raftmaster.Client(["n1:1"], token="two words")
    with pytest.raises(ValueError):
        raftmaster.Client([])


def test_lanes_give_concurrent_writes_their_own_identity():
    base = uuid.uuid4()
    lanes = _transport.Lanes(base)
    a, b = lanes.acquire(), lanes.acquire()
    assert a.id == base and b.id == uuid.uuid5(base, "2") and b.id.version == 5
    assert a.next() == "%s/1" % base and a.next() == "%s/2" % base
    lanes.release(a)
    assert lanes.acquire() is a


def test_a_lane_the_cluster_forgot_takes_the_next_identity():
    base = uuid.uuid4()
    lanes = _transport.Lanes(base)
    a = lanes.acquire()
    a.next()
    lanes.renew(a)
    assert a.id == uuid.uuid5(base, "2") and a.next() == "%s/1" % a.id
    assert lanes.acquire().id == uuid.uuid5(base, "3")


def request_ids(s):
    return [r["headers"][_transport.HEADER_REQUEST_ID] for r in s.requests]


UNKNOWN_CLIENT = (409, {}, {"code": "unknown_client", "message": "request id refused: unknown client id"})


def test_an_idle_lane_sends_its_write_again_under_a_new_identity(fake):
    # The cluster forgot the lane's identity while it was idle: the next
    # write's first attempt is refused, and, since nothing of it was
    # applied, goes again at once as sequence 1 of a new identity.
    s = fake([(200, {}, TASK), UNKNOWN_CLIENT, (200, {}, TASK)])
    c = raftmaster.Client([s.addr], retry=60, session_ttl=0)
    waits = recording_waits(c)
    c.get_task(0)
    assert c.get_task(0).meta == raftmaster.TaskMeta(3, 1)
    renewed = uuid.uuid5(c.id, "2")
    assert request_ids(s) == ["%s/1" % c.id, "%s/2" % c.id, "%s/1" % renewed]
    assert waits == []
    c.get_task(0)
    assert request_ids(s)[-1] == "%s/2" % renewed


def test_a_retry_refused_as_unknown_client_raises_with_an_unknown_outcome(fake):
    # The first attempt's answer was lost; its retry is refused because the
    # cluster does not hold the identity. The first attempt may have been
    # applied before the cluster forgot it: never sent again.
    s = fake([(200, {}, TASK), (503, {}, {"code": "unknown_outcome", "message": "lost"}), UNKNOWN_CLIENT])
    c = raftmaster.Client([s.addr], retry=60, session_ttl=0)
    recording_waits(c)
    c.get_task(0)
    with pytest.raises(raftmaster.UnknownClient) as e:
        c.get_task(0)
    assert "may or may not have applied" in str(e.value)
    ids = request_ids(s)
    assert len(ids) == 3 and ids[1] == ids[2] == "%s/2" % c.id


def test_write_retries_end_within_the_window(fake, monkeypatch):
    assert _transport.MAX_WRITE_RETRY <= _transport.DEDUP_WINDOW / 2
    monkeypatch.setattr(_transport, "MAX_WRITE_RETRY", 0.3)
    s = fake([(503, {}, {"code": "too_many_clients", "message": "no room"})])
    c = raftmaster.Client([s.addr], retry=3600)
    with pytest.raises(raftmaster.TooManyClients, match="giving up"):
        c.get_task(0)
    assert len(set(request_ids(s))) == 1


def test_the_window_is_the_contract_s():
    with open(os.path.join(REPO, "rpc", "types.go")) as f:
        src = f.read()
    import re
    assert re.search(r"\bDedupWindow\s*=\s*30 \* time\.Minute\b", src)
    assert re.search(r"\bMaxWriteRetry\s*=\s*DedupWindow / 2\b", src)
    assert _transport.DEDUP_WINDOW == 1800.0 and _transport.MAX_WRITE_RETRY == 900.0


def test_retry_after_forms():
    assert _transport.parse_retry_after("3") == 3.0
    assert _transport.parse_retry_after("0") == 0.0
    assert _transport.parse_retry_after("soon") == 0.0
    assert _transport.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 20 < _transport.parse_retry_after(later) <= 30


def test_go_durations():
    from raftmaster._duration import format_duration, parse_duration
    cases = {0: "0s", 1.5: "1.5s", 0.25: "250ms", 60: "1m0s", 90: "1m30s", 3600.5: "1h0m0.5s",
             0.000001: "1\u00b5s", 0.0000015: "1.5\u00b5s"}
    for secs, text in cases.items():
        assert format_duration(secs) == text
        assert parse_duration(text) == pytest.approx(secs)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("300us") == pytest.approx(0.0003)
    for bad in ("", "1", "1x", "s", "-"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_an_attempt_on_a_paused_leader_is_abandoned_for_the_new_one(tmp_path, dataset, caplog):
    import logging
    import signal
    from cluster import Cluster
    c3 = Cluster(str(tmp_path / "c"), nodes=3).start()
    paused = None
    try:
        paths, _ = dataset
        c = raftmaster.Client(c3.addrs, retry=60)
        c.set_dataset(paths, chunks_per_task=10)
        leader = c3.leader()
        assert c.leader == "http://" + leader
        paused = next(n for n in c3.nodes if n.api == leader)
        paused.proc.send_signal(signal.SIGSTOP)
        with caplog.at_level(logging.DEBUG, logger="raftmaster"):
            task = c.get_task(0)
        # The attempt hung on the paused node; the client asked the others
        # who leads and moved to the new leader, which served the call.
        assert any("abandoning an attempt" in r.getMessage() for r in caplog.records)
        assert c.leader not in ("", "http://" + leader)
        c.task_finished(task.meta)
        c.close()
    finally:
        if paused is not None:
            paused.proc.kill()
            paused.proc.wait(10)
        c3.stop()
