"""Real raftmaster clusters for the tests: "raftmaster serve" processes on
127.0.0.1 with free ports, and small HTTP proxies that record, drop or
redirect what passes through them."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import secrets
import signal
import socket
import socketserver
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def binary() -> str:
    """The raftmaster binary: $RAFTMASTER_BIN, else bin/raftmaster of the repository."""
    return os.environ.get("RAFTMASTER_BIN") or os.path.join(REPO, "bin", "raftmaster")


def free_ports(n: int) -> List[int]:
    """n distinct ports that nothing listens on at the moment."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 60.0, every: float = 0.05) -> None:
    """Wait for cond to hold, polling, for at most timeout seconds."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(every)


def http_get(addr: str, path: str, timeout: float = 1.0, headers: Optional[Dict[str, str]] = None,
             ssl_context=None):
    """GET http://addr/path (https with ssl_context); returns (status, decoded JSON or None), or (0, None)
    when unreachable."""
    if ssl_context is not None:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(addr, timeout=timeout, context=ssl_context)
    else:
        conn = http.client.HTTPConnection(addr, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
        try:
            return resp.status, json.loads(body)
        except ValueError:
            return resp.status, None
    except (OSError, http.client.HTTPException):
        return 0, None
    finally:
        conn.close()


class Node:
    """One "raftmaster serve" process."""

    def __init__(self, node_id: str, raft: str, api: str, data_dir: str, args: List[str]) -> None:
        self.id, self.raft, self.api, self.data_dir, self.args = node_id, raft, api, data_dir, args
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        os.makedirs(os.path.dirname(self.data_dir), exist_ok=True)
        log = open(self.data_dir + ".log", "ab")
        self.proc = subprocess.Popen([binary()] + self.args, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()

    def alive(self) -> bool:
        """Whether the process runs; an AssertionError with its log's end when it exited."""
        if self.proc is not None and self.proc.poll() is not None:
            with open(self.data_dir + ".log", "rb") as f:
                tail = f.read()[-2000:].decode("utf-8", "replace")
            raise AssertionError("%s exited with status %d:\n%s" % (self.id, self.proc.returncode, tail))
        return True

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Cluster:
    """A cluster of n "raftmaster serve" processes bootstrapped together.
    With ssl_context, the nodes serve HTTPS (args name the certificates)
    and the cluster's own probes trust that context."""

    def __init__(self, data_dir: str, nodes: int = 3, args: Optional[List[str]] = None, ssl_context=None) -> None:
        ports = free_ports(2 * nodes)
        raft = ["127.0.0.1:%d" % p for p in ports[:nodes]]
        self.addrs = ["127.0.0.1:%d" % p for p in ports[nodes:]]
        peers = ",".join("n%d=%s" % (i + 1, a) for i, a in enumerate(raft))
        args = list(args or [])
        if "--tls-cert" not in args and "--insecure" not in args:
            # Raft between the nodes: mutual TLS with a cluster key of their own.
            os.makedirs(data_dir, exist_ok=True)
            key = os.path.join(data_dir, "cluster.key")
            if not os.path.exists(key):
                fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(secrets.token_hex(32) + "\n")
            args = ["--cluster-key-file", key] + args
        self.nodes = []
        for i in range(nodes):
            nid = "n%d" % (i + 1)
            d = os.path.join(data_dir, nid)
            self.nodes.append(Node(nid, raft[i], self.addrs[i], d, [
                "serve", "--node-id", nid, "--data-dir", d, "--raft-addr", raft[i], "--http-addr", self.addrs[i],
                "--peers", peers, "--log-level", "warn"] + args))
        self.token = ""
        self.ssl_context = ssl_context

    def start(self) -> "Cluster":
        if not os.path.exists(binary()):
            raise RuntimeError("no raftmaster binary at %s: run make build (or set RAFTMASTER_BIN)" % binary())
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            wait_until(lambda n=n: n.alive() and http_get(n.api, "/readyz", ssl_context=self.ssl_context)[0] == 200,
                       "%s ready" % n.id)
        return self

    def stop(self) -> None:
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            n.stop()

    def _headers(self) -> Dict[str, str]:
        return {"Authorization": "Bearer " + self.token} if self.token else {}

    def leader(self) -> str:
        """The API address of the node that leads, waiting for one."""
        found: List[str] = []

        def look() -> bool:
            for a in self.addrs:
                status, st = http_get(a, "/v1/status?stale", headers=self._headers(), ssl_context=self.ssl_context)
                if status == 200 and st.get("state") == "Leader" and st.get("ready"):
                    found.append(a)
                    return True
            return False
        wait_until(look, "a leader")
        return found[0]

    def follower(self) -> str:
        """The API address of a node that does not lead."""
        leader = self.leader()
        return next(a for a in self.addrs if a != leader)


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Proxy:
    """An HTTP proxy on 127.0.0.1 in front of one upstream address. It
    records every request (method, path, headers, and the body sent) as it
    arrives, and the status and body the upstream answered once it has,
    and can drop the answers of chosen requests after the
    upstream has applied them: drop(path, n) makes it close the connection
    without answering the next n requests to a path ending with path (the
    query left out), answer(path) ends that. ``intercept``, when set, is
    called with each request's method, path and body, and answers the
    request itself, without the upstream, with the (status, JSON body) it
    returns, unless that is None."""

    def __init__(self, upstream: str, ssl_context=None) -> None:
        self.upstream = upstream
        self.requests: List[Dict] = []
        self.dropped: List[Dict] = []
        self.intercept: Optional[Callable[[str, str, Optional[bytes]], Optional[Tuple[int, Any]]]] = None
        self._drops: Dict[str, int] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                entry = {"method": self.command, "path": self.path, "headers": dict(self.headers),
                         "sent": body, "status": None, "body": None}
                with proxy._lock:
                    proxy.requests.append(entry)
                own = proxy.intercept(self.command, self.path, body) if proxy.intercept is not None else None
                if own is not None:
                    status, doc = own
                    data = json.dumps(doc).encode()
                    with proxy._lock:
                        entry["status"], entry["body"] = status, data
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except OSError:
                    self.close_connection = True
                    return
                finally:
                    conn.close()
                with proxy._lock:
                    entry["status"], entry["body"] = resp.status, data
                    path = self.path.split("?")[0]
                    drop = next((p for p, k in proxy._drops.items() if k > 0 and path.endswith(p)), None)
                    if drop is not None:
                        proxy._drops[drop] -= 1
                        proxy.dropped.append(entry)
                if drop is not None:
                    # The upstream applied it; the caller never hears.
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _forward

        self.server = _Server(("127.0.0.1", 0), Handler)
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
        self.addr = "127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def drop(self, path: str, n: int = 1) -> None:
        with self._lock:
            self._drops[path] = self._drops.get(path, 0) + n

    def answer(self, path: str) -> None:
        """Stop dropping the answers to path: forward them again."""
        with self._lock:
            self._drops.pop(path, None)

    def seen(self, path: str) -> List[Dict]:
        with self._lock:
            return [r for r in self.requests if r["path"].split("?")[0].endswith(path)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
