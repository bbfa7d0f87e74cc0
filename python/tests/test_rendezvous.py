"""The torchrun rendezvous backend and the agents' store on real clusters:
get_state and set_state with the register's version as fencing token, the
store's c10d semantics, and the rendezvous configuration (job, token, TLS)."""

import datetime
import itertools
import os
import pickle
import subprocess
import threading
import uuid

import pytest

import raftmaster
from raftmaster import _transport
from cluster import Cluster, binary, free_ports, wait_until

torch = pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")
from torch.distributed import PrefixStore  # noqa: E402
from torch.distributed.elastic.rendezvous import RendezvousConnectionError, RendezvousParameters  # noqa: E402
from torch.distributed.elastic.rendezvous import registry  # noqa: E402
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler  # noqa: E402

from raftmaster import torch_rendezvous as tr  # noqa: E402


@pytest.fixture(autouse=True)
def run_secret(monkeypatch):
    """The run's secret that signs the rendezvous state: the shared cluster
    has no tokens to derive a key from."""
    monkeypatch.setenv(tr.SECRET_ENV, "secret-of-the-run-" + uuid.uuid4().hex)


def params(endpoint, run_id, min_nodes=1, max_nodes=1, **config):
    if not isinstance(endpoint, str):
        endpoint = ",".join(endpoint)
    return RendezvousParameters("raftmaster", endpoint, run_id, min_nodes, max_nodes, **config)


def test_set_state_is_fenced_by_the_version(cluster, job):
    backend, _ = tr.create_backend(params(cluster.addrs, job))
    other, _ = tr.create_backend(params(cluster.addrs, job))
    assert backend.name == "raftmaster"
    assert backend.get_state() is None

    # No token: set only if there is no state.
    state, t1, has_set = backend.set_state(b"state 1")
    assert (state, has_set) == (b"state 1", True) and isinstance(t1, int) and t1 > 0
    assert backend.get_state() == (b"state 1", t1)
    assert other.set_state(b"state 1 bis") == (b"state 1", t1, False)

    # The current token wins once; the token it replaced is stale.
    state, t2, has_set = other.set_state(b"state 2", t1)
    assert (state, has_set) == (b"state 2", True) and t2 > t1
    assert backend.set_state(b"late", t1) == (b"state 2", t2, False)
    assert backend.get_state() == (b"state 2", t2)
    # A token of another backend cannot match.
    assert backend.set_state(b"foreign", b"c2F0ZQ==") == (b"state 2", t2, False)
    # A token for a run that has no state: nothing set, nothing to answer.
    lonely, _ = tr.create_backend(params(cluster.addrs, "another-run", job=job))
    assert lonely.key == tr.state_key("another-run")
    assert lonely.set_state(b"x", t2) is None and lonely.get_state() is None

    # The state is the run's key of the job's register, signed and
    # compressed, and the token its version.
    c = raftmaster.Client(cluster.addrs, job=job, retry=30)
    raw = c.kv_get(tr.state_key(job))
    assert raw.found and raw.version == t2 and raw.value.startswith(tr._MAGIC_ZLIB)
    assert tr._open(backend._sign_key, tr.state_key(job), raw.value) == b"state 2"
    c.close()


def test_a_set_state_whose_answer_is_lost_reports_that_it_set(proxies, cluster, job):
    p = proxies(cluster.leader())
    backend, _ = tr.create_backend(params([p.addr], job))
    p.drop("/kv/cas")
    state, token, has_set = backend.set_state(b"joined")
    # Retried with its request id, the write was applied once and the
    # retry got its outcome: a backend that read its own write back as
    # another's would make the node think it lost the race.
    assert (state, has_set) == (b"joined", True)
    sent = p.seen("/kv/cas")
    assert len(sent) == 2 and sent[0]["headers"][_transport.HEADER_REQUEST_ID] == sent[1]["headers"][
        _transport.HEADER_REQUEST_ID]
    assert backend.get_state() == (b"joined", token)


def test_the_store(store_cluster, job):
    cluster = store_cluster
    _, store = tr.create_backend(params(cluster.addrs, job))
    _, peer = tr.create_backend(params(cluster.addrs, job))
    store.set("MASTER_ADDR", b"n1.example")
    assert peer.get("MASTER_ADDR") == b"n1.example"
    store.set("MASTER_ADDR", "n2.example")
    assert peer.get("MASTER_ADDR") == b"n2.example"
    assert store.add("count", 2) == 2 and peer.add("count", 3) == 5 and store.get("count") == b"5"
    # compare_set as c10d's: set when the value is the expected one, or
    # when the key does not exist and the expected value is empty.
    assert store.compare_set("cs", "x", "y") == b"x" and not store.check(["cs"])
    assert store.compare_set("cs", "", "first") == b"first"
    assert peer.compare_set("cs", "other", "second") == b"first"
    assert peer.compare_set("cs", "first", "second") == b"second"
    assert store.check(["cs", "count"]) and not store.check(["cs", "absent"])

    # A read waits for the key, which another agent sets meanwhile.
    setter = threading.Timer(0.3, lambda: peer.set("late", b"here"))
    setter.start()
    store.wait(["late"], datetime.timedelta(seconds=30))
    assert store.get("late") == b"here"
    setter.join()
    store.set_timeout(datetime.timedelta(milliseconds=300))
    with pytest.raises(LookupError, match="never"):
        store.get("never")
    with pytest.raises(LookupError):
        store.wait(["late", "never"])
    assert store.delete_key("late") and not store.delete_key("late") and not store.check(["late"])

    # Through torch's PrefixStore, as the agents use it, with bytes that
    # are not text, in keys of the run's own.
    ps = PrefixStore("torch.rendezvous.%s.0" % job, store)
    ps.set("torchelastic/role_info0", b"\x80\x04\x95\x00 \xff")
    assert PrefixStore("torch.rendezvous.%s.0" % job, peer).get("torchelastic/role_info0") == b"\x80\x04\x95\x00 \xff"
    c = raftmaster.Client(cluster.addrs, job=job, retry=30)
    v = c.kv_get(tr.store_key(job, "torch.rendezvous.%s.0/torchelastic/role_info0" % job))
    assert v.value == b"\x80\x04\x95\x00 \xff"
    c.close()
    # Another run id in the job has a store of its own.
    _, elsewhere = tr.create_backend(params(cluster.addrs, job + "-2", job=job))
    assert not elsewhere.check(["MASTER_ADDR"])


def test_register_keys():
    assert tr.state_key("job1") == "torchrun/rdzv/job1"
    assert tr.store_key("job1", "torch.rendezvous.job1.0/MASTER_ADDR") == (
        "torchrun/store/job1/torch.rendezvous.job1.0/MASTER_ADDR")
    # Spaces, '%', non-ASCII and '/' in a run id are escaped: distinct run
    # ids and keys never share a register key.
    assert tr.state_key("a b%/c\u00e9") == "torchrun/rdzv/a%20b%25%2Fc%C3%A9"
    assert tr.store_key("a/b", "c") != tr.store_key("a", "b/c")
    long_key = tr.store_key("r" * 300, "k")
    assert long_key.startswith("torchrun/store-sha256/") and len(long_key) <= 256
    assert long_key != tr.store_key("r" * 300, "k2")
    for k in [tr.state_key("x" * 1000), tr.store_key("\x00\n", "\t \x7f")]:
        assert len(k) <= 256 and all("!" <= ch <= "~" for ch in k)


def test_the_configuration(cluster, monkeypatch, proxies, tmp_path):
    # The job is the run id by default, which must then be a job name.
    assert tr.create_client(params(cluster.addrs, "run-7")).job == "run-7"
    assert tr.create_client(params(cluster.addrs, "Run_7", job="resnet")).job == "resnet"
    with pytest.raises(ValueError, match="job=NAME"):
        tr.create_client(params(cluster.addrs, "Run_7"))
    with pytest.raises(ValueError, match="not a job name"):
        tr.create_client(params(cluster.addrs, "run", job="Bad_Job"))
    with pytest.raises(ValueError, match="no endpoint"):
        tr.create_client(params(" , ", "run"))
    with pytest.raises(ValueError, match="read_timeout"):
        tr.create_client(params(cluster.addrs, "run", read_timeout="0"))

    # The token from the configuration, else from RAFTMASTER_TOKEN.
    p = proxies(cluster.leader())
    monkeypatch.setenv("RAFTMASTER_TOKEN", "from-the-environment")
    tr.create_client(params([p.addr], "tok")).status()
    tr.create_client(params([p.addr], "tok", token="from-the-config")).status()
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    monkeypatch.delenv("RAFTMASTER_TOKEN")
    monkeypatch.setenv("RAFTMASTER_TOKEN_FILE", str(token_file))
    tr.create_client(params([p.addr], "tok")).status()
    monkeypatch.delenv("RAFTMASTER_TOKEN_FILE")
    # Each client's status (a job's: two reads) with its token.
    sent = [r["headers"].get("Authorization") for r in p.requests]
    assert [k for k, _ in itertools.groupby(sent)] == [
        "Bearer from-the-environment", "Bearer from-the-config", "Bearer from-a-file"], sent

    # A cluster that cannot be reached: the rendezvous fails within read_timeout.
    dead = "127.0.0.1:%d" % free_ports(1)[0]
    backend, _ = tr.create_backend(params([dead], "unreachable", read_timeout="1"))
    with pytest.raises(RendezvousConnectionError):
        backend.get_state()

    # The handler torchrun gets.
    tr.register()
    tr.register()  # again: nothing changes
    handler = registry.get_rendezvous_handler(params(cluster.addrs, "h-" + uuid.uuid4().hex[:8], 1, 1,
                                                     join_timeout="60"))
    assert isinstance(handler, DynamicRendezvousHandler) and handler.get_backend() == "raftmaster"
    store, rank, world_size = handler.next_rendezvous()
    assert (rank, world_size) == (0, 1)
    store.set("k", b"v")
    assert store.get("k") == b"v"
    state, _ = handler._state_holder._backend.get_state()
    assert pickle.loads(state).complete
    assert handler.shutdown()
    assert pickle.loads(handler._state_holder._backend.get_state()[0]).closed


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """A 1-node cluster over HTTPS with tokens: certificates by raftmaster tls gen."""
    d = tmp_path_factory.mktemp("secure")
    certs = d / "certs"
    subprocess.run([binary(), "tls", "gen", "--out", str(certs), "--hosts", "127.0.0.1,localhost"], check=True,
                   capture_output=True)
    tokens = d / "tokens"
    token = "trainer-" + uuid.uuid4().hex
    tokens.write_text("trainer %s\noperator operator-%s\n" % (token, uuid.uuid4().hex))
    tokens.chmod(0o600)  # serve refuses a token file others may read
    import ssl
    ca = str(certs / "ca.crt")
    c = Cluster(str(d), nodes=1, ssl_context=ssl.create_default_context(cafile=ca), args=[
        "--tls-cert", str(certs / "node.crt"), "--tls-key", str(certs / "node.key"), "--tls-ca", ca,
        "--auth-tokens", str(tokens)])
    c.token = token
    c.start()
    yield c, ca, token
    c.stop()


def test_over_https_with_a_token_from_the_environment(secure, monkeypatch, job):
    cluster, ca, token = secure
    monkeypatch.delenv(tr.SECRET_ENV)  # the state is signed under a key of the token
    monkeypatch.setenv("RAFTMASTER_TOKEN", token)
    monkeypatch.setenv("RAFTMASTER_TLS_CA", ca)
    backend, store = tr.create_backend(params(cluster.addrs, job))
    assert backend._client.addrs == ["https://" + cluster.addrs[0]]
    _, t, has_set = backend.set_state(b"over TLS")
    assert has_set and backend.get_state() == (b"over TLS", t)
    store.set("k", b"v")
    assert store.get("k") == b"v"
    # From the configuration instead, which comes first.
    monkeypatch.delenv("RAFTMASTER_TLS_CA")
    monkeypatch.setenv("RAFTMASTER_TOKEN", "not-a-known-token")
    configured, _ = tr.create_backend(params(cluster.addrs, job, tls_ca=ca, token=token))
    assert configured.get_state() == (b"over TLS", t)
    # Without the token the cluster refuses; without the CA the handshake fails.
    refused, _ = tr.create_backend(params(cluster.addrs, job, tls_ca=ca, read_timeout="1"))
    with pytest.raises(RendezvousConnectionError, match="unauthorized"):
        refused.get_state()
    untrusting, _ = tr.create_backend(params(["https://" + cluster.addrs[0]], job, token=token, read_timeout="1"))
    with pytest.raises(RendezvousConnectionError):
        untrusting.get_state()
    with pytest.raises(ValueError, match="tls_ca"):
        tr.create_backend(params(cluster.addrs, job, tls_ca=os.path.join(os.path.dirname(ca), "absent.crt")))


class _Payload:
    """A pickle that creates a file when it is unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_forged_state_is_never_unpickled(cluster, job, tmp_path):
    """A state written into a run's key by anyone but its agents (unsigned,
    or signed under another key) is refused with a clear error before torch
    unpickles it: the payload's file is never created."""
    marker = tmp_path / "unpickled"
    run = job
    c = raftmaster.Client(cluster.addrs, job=job, retry=30)
    c.kv_cas(tr.state_key(run), 0, pickle.dumps(_Payload(str(marker))))
    tr.register()
    handler = registry.get_rendezvous_handler(params(cluster.addrs, run, 1, 1, join_timeout="10"))
    with pytest.raises(Exception) as e:
        handler.next_rendezvous()
    handler._raftmaster_sessions.finish()  # it never shuts down
    assert not marker.exists(), "the forged state was unpickled: it created %s" % marker
    assert "not signed" in str(e.value), e.value
    backend, _ = tr.create_backend(params(cluster.addrs, run))
    with pytest.raises(tr.RendezvousStateError, match="not signed"):
        backend.get_state()
    # Signed, but under another key (another run's secret, another token).
    v = c.kv_get(tr.state_key(run))
    other = tr.RaftmasterRendezvousBackend(c, run, tr.signing_key(job, secret="another-secret"))
    forged = tr._sign(other._sign_key, tr.state_key(run), pickle.dumps(_Payload(str(marker))))
    assert c.kv_cas(tr.state_key(run), v.version, forged).swapped
    with pytest.raises(tr.RendezvousStateError, match="does not check"):
        backend.get_state()
    with pytest.raises(tr.RendezvousStateError, match="does not check"):
        backend.set_state(b"x")  # answered with the forged state, which is refused too
    assert not marker.exists()
    c.close()


def test_the_state_is_signed_compressed_and_both_formats_read():
    """A state is written compressed (a thousand nodes' state shrinks about
    sixfold) and signed over the compressed bytes; a state of the earlier
    uncompressed format still reads; tampering, a signature of one format
    passed as the other, and a corrupt or oversized payload are refused."""
    key, other = tr.signing_key("j", secret="s"), tr.signing_key("j", secret="t")
    rk = tr.state_key("run")
    state = pickle.dumps([("agent-%05d.example" % i, i, datetime.datetime(2026, 1, 1)) for i in range(1000)])
    signed = tr._sign(key, rk, state)
    assert signed.startswith(tr._MAGIC_ZLIB)
    assert len(signed) * 4 < len(state), (len(signed), len(state))
    assert tr._open(key, rk, signed) == state
    old = tr._MAGIC + tr._mac(key, rk, state) + state  # the earlier release's format
    assert tr._open(key, rk, old) == state
    for bad in (tr._sign(other, rk, state),  # another key
                tr._sign(key, tr.state_key("another-run"), state),  # another run's key
                signed[:-1] + bytes([signed[-1] ^ 1]),  # tampered
                tr._MAGIC + signed[len(tr._MAGIC_ZLIB):],  # a compressed signature as the old format
                tr._MAGIC_ZLIB + old[len(tr._MAGIC):]):  # and the other way round
        with pytest.raises(tr.RendezvousStateError, match="does not check"):
            tr._open(key, rk, bad)
    # Signed by the key's holder, but not a whole zlib stream, or one that
    # inflates past the bound: refused, not inflated without limit.
    import zlib
    for payload, why in ((zlib.compress(state)[:-8], "truncated"), (b"not zlib", "does not decompress")):
        forged = tr._MAGIC_ZLIB + tr._mac(key, rk, payload, tr._ZLIB_LABEL) + payload
        with pytest.raises(tr.RendezvousStateError, match=why):
            tr._open(key, rk, forged)
    bomb = zlib.compress(bytes(tr._MAX_STATE + 1), 9)
    forged = tr._MAGIC_ZLIB + tr._mac(key, rk, bomb, tr._ZLIB_LABEL) + bomb
    with pytest.raises(tr.RendezvousStateError, match="larger than"):
        tr._open(key, rk, forged)


def test_no_key_no_rendezvous(cluster, monkeypatch, job):
    """Without the run's secret or a token, the backend refuses to start."""
    monkeypatch.delenv(tr.SECRET_ENV)
    monkeypatch.delenv("RAFTMASTER_TOKEN", raising=False)
    with pytest.raises(ValueError, match=tr.SECRET_ENV):
        tr.create_backend(params(cluster.addrs, job))


def through_proxy(proxies, cluster, job, **config):
    """A store of run job that talks to the leader through a proxy, and the proxy."""
    p = proxies(cluster.leader())
    _, store = tr.create_backend(params([p.addr], job, **config))
    return store, p


def test_the_store_calls_are_native(store_cluster, proxies, job):
    """On a cluster at protocol level 5 each store call is one request of
    the register's own: no compare-and-set loop, no read before a write."""
    store, p = through_proxy(proxies, store_cluster, job)
    store.set("a", b"1")
    store.multi_set(["b", "c", "b"], [b"2", b"3", b"4"])  # a key twice: the last value, as c10d's
    assert store.multi_get(["a", "b", "c"]) == [b"1", b"4", b"3"]
    assert store.add("n", 5) == 5 and store.add("n", -2) == 3
    store.append("log", b"ab")
    store.append("log", "c")
    assert store.get("log") == b"abc"
    assert store.compare_set("cs", "x", "y") == b"x" and not store.check(["cs"])
    assert store.compare_set("cs", "", "first") == b"first"
    assert store.compare_set("cs", "other", "second") == b"first"
    assert store.compare_set("cs", "first", "second") == b"second"
    assert store.check(["a", "b", "cs"]) and not store.check(["a", "absent"])
    assert store.num_keys() == 6
    assert store.delete_key("a") and not store.delete_key("a") and store.num_keys() == 5
    with pytest.raises(ValueError, match="not a decimal integer"):
        store.add("log", 1)
    assert p.seen("/kv/cas") == [], "a native call fell back to compare-and-set"
    assert len(p.seen("/kv/add")) == 3 and len(p.seen("/kv/append")) == 2 and len(p.seen("/kv/compare-set")) == 4
    assert len(p.seen("/v1/status")) == 1, "the protocol level is asked once"

    # A store of another run in the job counts and deletes only its own keys.
    _, other = tr.create_backend(params(store_cluster.addrs, job + "-2", job=job))
    other.set("a", b"x")
    assert other.num_keys() == 1 and store.num_keys() == 5


def test_get_and_wait_block_on_the_watch(store_cluster, proxies, job):
    """A get or a wait that finds a key missing blocks on the register's
    watch until another agent sets it: one read, then one watch, and no
    polling reads."""
    store, p = through_proxy(proxies, store_cluster, job)
    _, peer = tr.create_backend(params(store_cluster.addrs, job))
    peer.set("there", b"x")
    calls = [(lambda: store.get("late"), "late"), (lambda: store.wait(["there", "late2"]), "late2")]
    results = []
    for n, (call, key) in enumerate(calls, start=1):
        got = []
        reader = threading.Thread(target=lambda: got.append(call()))
        reader.start()
        wait_until(lambda: len(p.seen("/kv/watch")) == n, "the store's watch of %s" % key)
        peer.set(key, b"here")
        reader.join(60)
        assert len(got) == 1 and not reader.is_alive()
        results += got
    assert results == [b"here", None] and store.get("late") == b"here"
    assert len(p.seen("/kv/multi-get")) == 3, "a read polled instead of watching"
    # A timeout still raises LookupError.
    store.set_timeout(datetime.timedelta(milliseconds=200))
    with pytest.raises(LookupError, match="never"):
        store.get("never")


def test_the_store_polls_a_cluster_without_the_watch(store_cluster, job, monkeypatch):
    """Against a release without the register's watch (its route answers
    not_found), a read polls as it did before, and asks for the watch
    again only after a while."""
    _, store = tr.create_backend(params(store_cluster.addrs, job))
    _, peer = tr.create_backend(params(store_cluster.addrs, job))
    watches = []

    def no_watch(*args, **kw):
        watches.append(args)
        raise raftmaster.NotFound("no endpoint /v1/kv/watch")
    monkeypatch.setattr(store._client, "kv_watch", no_watch)
    setter = threading.Timer(0.3, lambda: peer.set("late", b"here"))
    setter.start()
    assert store.get("late") == b"here"
    setter.join()
    assert len(watches) == 1
    store.set_timeout(datetime.timedelta(milliseconds=200))
    with pytest.raises(LookupError):
        store.get("never")
    assert len(watches) == 1, "the store asked again at once for a watch the cluster does not have"


def test_the_store_below_protocol_level_5(store_cluster, proxies, job, monkeypatch):
    """A store of a cluster below protocol level 5 does what it did before:
    compare-and-set loops for add, append and compare_set, and a clear
    error for delete_key and num_keys, which it cannot do."""
    store, p = through_proxy(proxies, store_cluster, job)
    monkeypatch.setattr(store._client, "protocol", lambda: 4)
    store.set("a", b"1")
    store.multi_set(["b", "c"], [b"2", b"3"])
    assert store.multi_get(["a", "b", "c"]) == [b"1", b"2", b"3"]
    assert store.add("n", 5) == 5 and store.add("n", 1) == 6
    store.append("log", b"ab")
    store.append("log", b"c")
    assert store.get("log") == b"abc"
    assert store.compare_set("cs", "", "first") == b"first" and store.compare_set("cs", "x", "y") == b"first"
    assert store.check(["a", "cs"]) and not store.check(["absent"])
    with pytest.raises(RuntimeError, match="num_keys needs a cluster at protocol level 5"):
        store.num_keys()
    with pytest.raises(RuntimeError, match="delete_key needs a cluster at protocol level 5"):
        store.delete_key("a")
    native = ("/kv/add", "/kv/append", "/kv/compare-set", "/kv/multi-set", "/kv/multi-get", "/kv/delete")
    assert not any(p.seen(path) for path in native), "a call of protocol level 5 reached a cluster below it"
    assert p.seen("/kv/cas")
    # The rounds' keys stay where they cannot be deleted.
    assert store.forget_round(0) == 0 and store.check(["a"])


def rendezvous(handler):
    """The store of the next round of handler (torch returns a tuple, or an
    object from 2.4 on)."""
    info = handler.next_rendezvous()
    return info[0] if isinstance(info, tuple) else info.store


def agent_keys(store, rank, world):
    """Write what a torchrun agent writes in its round's store: the role
    infos (a synchronize), the workers' master address and the exit
    barrier (another synchronize)."""
    if rank == 0:
        store.set("MASTER_ADDR", b"127.0.0.1")
        store.set("MASTER_PORT", b"29500")
    for prefix in ("torchelastic/role_info", "torchelastic/exit_barrier"):
        store.set("%s%d" % (prefix, rank), b"agent %d" % rank)
        assert all(store.get("%s%d" % (prefix, r)) for r in range(world))
        store.set("%s%d.FIN" % (prefix, rank), b"FIN")


def test_a_long_elastic_run_holds_bounded_keys(store_cluster, job):
    """50 restarts of a run, each a round whose agent writes its keys, leave
    the job holding the keys of at most two rounds and the rendezvous
    state; once the run is closed, the state alone. Without deletes the
    job held every round's keys, and a long job reached max_job_kv_keys."""
    tr.register()
    c = raftmaster.Client(store_cluster.addrs, job=job, retry=30)
    handler = registry.get_rendezvous_handler(params(store_cluster.addrs, job, 1, 1, join_timeout="60"))
    per_round = 6
    most = 0
    for r in range(50):
        store = rendezvous(handler)
        agent_keys(store, 0, 1)
        held = c.kv_num_keys()
        most = max(most, held)
        assert held <= 1 + 2 * per_round, "round %d: the job holds %d keys" % (r, held)
    state, _ = handler._state_holder._backend.get_state()
    assert pickle.loads(state).round == 49
    assert handler.shutdown()
    assert c.kv_num_keys() == 1 and c.kv_get(tr.state_key(job)).found
    assert pickle.loads(handler._state_holder._backend.get_state()[0]).closed
    c.close()


def test_the_last_agent_out_deletes_the_run(store_cluster, job):
    """Two agents rendezvous for two rounds; the first round's keys go once
    the second is complete. When the run closes, its keys stay until the
    last participant shuts down: the other may still be in its exit
    barrier, reading them."""
    tr.register()
    c = raftmaster.Client(store_cluster.addrs, job=job, retry=30)
    handlers = [registry.get_rendezvous_handler(params(store_cluster.addrs, job, 2, 2, join_timeout="60",
                                                       last_call_timeout="1")) for _ in range(2)]
    prefix = tr.store_prefix(job)

    def round_keys(r):
        return c.kv_num_keys(prefix + "torch.rendezvous.%s.%d/" % (job, r))

    for r in range(2):
        results = [None, None]

        def join(i):
            store = rendezvous(handlers[i])
            rank = handlers[i]._state_holder.state.participants[handlers[i]._this_node]
            agent_keys(store, rank, 2)
            results[i] = rank
        threads = [threading.Thread(target=join, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert sorted(results) == [0, 1], results
        assert round_keys(r) == 2 + 2 * 4
        if r > 0:
            assert round_keys(r - 1) == 0
    assert handlers[0].shutdown()
    assert round_keys(1) == 10, "the first agent out deleted the keys the other may still read"
    assert handlers[1].shutdown()
    assert c.kv_num_keys(prefix) == 0 and c.kv_num_keys() == 1
    c.close()
