"""A client that never reaches the cluster fails soon, naming each address
and what it did; one that reached it says once that it waits for a leader."""

import http.server
import json
import logging
import socket
import threading

import pytest

import raftmaster


def closed_addr():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return addr


def call_within(fn, limit):
    """Run fn in a thread; return what it raised, failing when it has not ended within limit seconds."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    if t.is_alive():
        pytest.fail("still waiting after %ss" % limit)
    return out.get("error")


def test_wrong_address_fails_fast():
    addr = closed_addr()
    # The old client retried for its whole budget (two minutes): this
    # bound, well under it, is what it would hit first.
    with raftmaster.Client([addr]) as c:
        err = call_within(c.status, 25)
    assert err is not None, "status of a closed port answered"
    assert isinstance(err, raftmaster.TransportError), repr(err)
    assert addr + ": connection refused" in str(err), str(err)


def test_first_contact_timeout_names_every_address():
    dead, other = closed_addr(), closed_addr()
    with raftmaster.Client([dead, other, "nohost.invalid:1"], first_contact_timeout=1) as c:
        err = call_within(c.status, 25)
    assert isinstance(err, raftmaster.NoContact), repr(err)
    for want in (dead + ": connection refused", other + ": connection refused", "nohost.invalid:1: cannot resolve"):
        assert want in str(err), str(err)


def test_first_contact_timeout_zero_waits_the_budget():
    with raftmaster.Client([closed_addr()], first_contact_timeout=0, retry=3) as c:
        err = call_within(c.status, 60)
    assert isinstance(err, raftmaster.TransportError) and not isinstance(err, raftmaster.NoContact), repr(err)
    assert "giving up" in str(err), str(err)


class _NoLeaderThenStatus(http.server.BaseHTTPRequestHandler):
    """Answers no_leader to the first `no_leader` requests, then a status."""

    no_leader = 0
    lock = threading.Lock()

    def do_GET(self):  # noqa: N802 - http.server's name
        cls = type(self)
        with cls.lock:
            refuse = cls.no_leader > 0
            cls.no_leader -= 1
        if refuse:
            body = json.dumps({"code": "no_leader", "message": "no leader"}).encode()
            self.send_response(503)
        else:
            body = json.dumps({"node_id": "n1", "state": "Leader", "ready": True}).encode()
            self.send_response(200)
        self.send_header("X-Raftmaster-Node", "n1")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_wait_for_leader_is_logged_once(caplog):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoLeaderThenStatus)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with raftmaster.Client(["127.0.0.1:%d" % srv.server_address[1]], retry=30) as c:
            c.status()
            _NoLeaderThenStatus.no_leader = 4
            with caplog.at_level(logging.INFO, logger="raftmaster"):
                c.status()
        waits = [r for r in caplog.records if "waiting for the cluster's leader" in r.getMessage()]
        assert len(waits) == 1, [r.getMessage() for r in caplog.records]
        assert any("the cluster answers again" in r.getMessage() for r in caplog.records), \
            [r.getMessage() for r in caplog.records]
    finally:
        srv.shutdown()
        srv.server_close()


def test_records_of_a_wrong_address_fail_fast():
    addr = closed_addr()
    with raftmaster.Client([addr], first_contact_timeout=1) as c:
        err = call_within(lambda: list(c.records(0)), 25)
    assert isinstance(err, raftmaster.NoContact) and addr in str(err), repr(err)
