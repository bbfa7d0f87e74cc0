"""The job's register (kv_get, kv_cas) against a real 3-node cluster, with
a proxy that loses answers."""

import base64
import datetime
import json
import threading
import uuid

import pytest

import raftmaster
from raftmaster import _transport
from cluster import wait_until


def test_compare_and_set_and_read(client, make_client):
    assert client.kv_get("rdzv") == raftmaster.KVValue(found=False, value=None, version=0)
    first = client.kv_cas("rdzv", 0, b"round 1")
    assert first.swapped and first.found and first.value == b"round 1" and first.version > 0
    assert client.kv_get("rdzv") == raftmaster.KVValue(True, b"round 1", first.version)

    # Version 0 means "must not exist": a second creator loses and learns the value.
    other = make_client()
    lost = other.kv_cas("rdzv", 0, b"round 1 bis")
    assert lost == raftmaster.KVResult(swapped=False, found=True, value=b"round 1", version=first.version)

    second = other.kv_cas("rdzv", first.version, b"\x00\xffround 2")
    assert second.swapped and second.version > first.version
    # The first version is stale now: a write fenced by it changes nothing.
    stale = client.kv_cas("rdzv", first.version, b"late")
    assert not stale.swapped and (stale.value, stale.version) == (b"\x00\xffround 2", second.version)
    assert client.kv_get("rdzv").value == b"\x00\xffround 2"

    # An empty value is a value.
    empty = client.kv_cas("empty", 0, b"")
    assert empty.swapped and client.kv_get("empty") == raftmaster.KVValue(True, b"", empty.version)
    # A version naming a key that does not exist swaps nothing.
    assert client.kv_cas("absent", 7, b"x") == raftmaster.KVResult(False, False, None, 0)
    assert not client.kv_get("absent").found


def test_the_register_is_per_job(cluster, make_client, job):
    a = make_client()
    b = make_client(job=job + "-b")
    d = make_client(job=None)
    key = "k-" + uuid.uuid4().hex
    ra = a.kv_cas(key, 0, b"a")
    rb = b.kv_cas(key, 0, b"b")
    assert ra.swapped and rb.swapped and ra.version != rb.version
    assert a.kv_get(key).value == b"a" and b.kv_get(key).value == b"b"
    assert not d.kv_get(key).found
    # The job-scoped route is the one a job's client uses.
    from cluster import http_get
    status, doc = http_get(cluster.addrs[0], "/v1/jobs/%s/kv/get?key=%s" % (job, key))
    if status == 307:
        status, doc = http_get(cluster.leader(), "/v1/jobs/%s/kv/get?key=%s" % (job, key))
    assert status == 200 and base64.b64decode(doc["value"]) == b"a" and doc["version"] == ra.version


def test_bad_keys_and_values_change_nothing(client):
    for key in ["", "has space", "x" * 257, "caf\u00e9"]:
        with pytest.raises(raftmaster.Invalid):
            client.kv_cas(key, 0, b"v")
        with pytest.raises(raftmaster.Invalid):
            client.kv_get(key)
    with pytest.raises(raftmaster.LimitExceeded) as e:
        client.kv_cas("big", 0, b"x" * ((1 << 20) + 1))
    assert "max_kv_value" in str(e.value)
    assert not client.kv_get("big").found
    with pytest.raises(ValueError):
        client.kv_cas("k", -1, b"v")
    with pytest.raises(TypeError):
        client.kv_cas("k", 0, "not bytes")
    assert not client.kv_get("k").found


def test_a_compare_and_set_whose_answer_is_lost_is_applied_once(make_client, proxies, cluster):
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    p.drop("/kv/cas")
    res = c.kv_cas("rdzv", 0, b"state 1")
    sent = p.seen("/kv/cas")
    assert len(sent) == 2 and len(p.dropped) == 1
    ids = [r["headers"][_transport.HEADER_REQUEST_ID] for r in sent]
    # The client's own identity, or its session's.
    lane = uuid.uuid5(c.id, "session/%d" % c.session_id) if c.session_id else c.id
    assert ids[0] == ids[1] and ids[0].startswith(str(lane) + "/")
    # The retry got the outcome of the lost first attempt, which swapped,
    # with the version the first answer carried: it was not applied again,
    # which would have found the key existing and not swapped.
    first = json.loads(p.dropped[0]["body"])
    assert first["swapped"] and res.swapped and res.version == first["version"]
    assert c.kv_get("rdzv") == raftmaster.KVValue(True, b"state 1", res.version)

    # A compare-and-set that did not swap, retried: the key as it is then.
    other = make_client()
    newer = other.kv_cas("rdzv", res.version, b"state 2")
    p.drop("/kv/cas")
    lost = c.kv_cas("rdzv", res.version, b"state 2 bis")
    assert not lost.swapped and (lost.value, lost.version) == (b"state 2", newer.version)
    assert len(p.seen("/kv/cas")) == 4
    assert c.kv_get("rdzv").value == b"state 2"


def test_the_cluster_has_the_store_calls(store_cluster, client):
    assert client.protocol() >= raftmaster.KV_STORE_PROTOCOL


def test_delete_and_prefix_delete(store_cluster, client, make_client):
    first = client.kv_cas("k", 0, b"one")
    second = client.kv_cas("k", first.version, b"two")
    # A conditional delete deletes only the version it names.
    assert client.kv_delete("k", first.version) == raftmaster.KVDeleteResult(False, True, second.version)
    assert client.kv_get("k").version == second.version
    assert client.kv_delete("k", second.version) == raftmaster.KVDeleteResult(True, True, second.version)
    assert not client.kv_get("k").found
    assert client.kv_delete("k") == raftmaster.KVDeleteResult(False, False, 0)
    # A compare-and-set fenced by a deleted version finds the key absent:
    # nothing comes back; created again, the key takes a higher version.
    for v in (first.version, second.version):
        assert client.kv_cas("k", v, b"back") == raftmaster.KVResult(False, False, None, 0)
    assert client.kv_cas("k", 0, b"three").version > second.version

    client.kv_multi_set({"run/0/a": b"1", "run/0/b": b"2", "run/1/a": b"3", "run/10/a": b"4"})
    assert client.kv_num_keys("run/") == 4 and client.kv_num_keys() == 5
    assert client.kv_delete_prefix("run/1/") == 1
    assert client.kv_delete_prefix("run/1/") == 0
    assert client.kv_num_keys("run/") == 3
    # Another job's keys are its own.
    other = make_client(job=client.job + "-b")
    other.kv_cas("run/0/a", 0, b"x")
    assert client.kv_delete_prefix("run/") == 3 and other.kv_get("run/0/a").found
    assert client.kv_num_keys() == 1
    with pytest.raises(raftmaster.Invalid):
        client.kv_delete_prefix("")
    with pytest.raises(raftmaster.Invalid):
        client.kv_delete("two words")
    with pytest.raises(raftmaster.Invalid):
        client.kv_num_keys("two words")


def test_add_multi_set_append_and_compare_value(store_cluster, client):
    assert client.kv_add("n", 2) == 2 and client.kv_add("n", -5) == -3
    assert client.kv_get("n").value == b"-3"
    client.kv_cas("text", 0, b"not a number")
    with pytest.raises(raftmaster.Invalid, match="not a decimal integer"):
        client.kv_add("text", 1)
    assert client.kv_get("text").value == b"not a number"
    with pytest.raises(TypeError):
        client.kv_add("n", 1.5)

    versions = client.kv_multi_set([("a", b"1"), ("b", b"\x00\xff")])
    assert len(versions) == 2 and versions[1] == versions[0] + 1
    got = client.kv_multi_get(["b", "absent", "a"])
    assert got == [raftmaster.KVValue(True, b"\x00\xff", versions[1]), raftmaster.KVValue(False, None, 0),
                   raftmaster.KVValue(True, b"1", versions[0])]
    with pytest.raises(raftmaster.Invalid, match="set twice"):
        client.kv_multi_set([("a", b"1"), ("a", b"2")])
    with pytest.raises(raftmaster.LimitExceeded):
        client.kv_multi_set([("big1", b"x" * (1 << 19)), ("big2", b"x" * ((1 << 19) + 1))])
    assert not client.kv_get("big1").found

    assert client.kv_append("log", b"ab") == 2 and client.kv_append("log", b"c") == 3
    assert client.kv_get("log").value == b"abc"

    r = client.kv_compare_value("cs", b"x", b"y")
    assert not r.swapped and not r.found
    r = client.kv_compare_value("cs", b"", b"first")
    assert r.swapped and r.value == b"first"
    assert client.kv_compare_value("cs", b"other", b"second") == raftmaster.KVResult(False, True, b"first", r.version)
    assert client.kv_compare_value("cs", b"first", b"second").swapped
    assert client.kv_get("cs").value == b"second"


def test_a_delete_and_an_add_whose_answers_are_lost_are_applied_once(store_cluster, make_client, proxies, cluster):
    p = proxies(cluster.leader())
    c = make_client([p.addr])
    v = c.kv_cas("k", 0, b"v")
    p.drop("/kv/delete")
    assert c.kv_delete("k") == raftmaster.KVDeleteResult(True, True, v.version)
    sent = p.seen("/kv/delete")
    assert len(sent) == 2 and len(p.dropped) == 1
    assert sent[0]["headers"][_transport.HEADER_REQUEST_ID] == sent[1]["headers"][_transport.HEADER_REQUEST_ID]
    assert json.loads(p.dropped[0]["body"])["deleted"]

    c.kv_add("n", 10)
    p.drop("/kv/add")
    assert c.kv_add("n", 1) == 11  # the retry answers the sum the first attempt made
    assert c.kv_get("n").value == b"11"


def test_watch(store_cluster, make_client, proxies):
    """kv_watch blocks at the leader until the key changes: a watch of an
    absent key returns it once another client writes it, one at the key's
    version once it is written again or deleted, and one that times out
    returns the key as it is, timed_out set."""
    p = proxies(store_cluster.leader())
    c = make_client([p.addr])
    other = make_client()
    got = []
    watcher = threading.Thread(target=lambda: got.append(c.kv_watch("k", timeout=30)))
    watcher.start()
    wait_until(lambda: p.seen("/kv/watch"), "the watch at the leader")
    first = other.kv_cas("k", 0, b"one")
    watcher.join(60)
    assert got == [raftmaster.KVWatchResult(True, b"one", first.version, timed_out=False)]
    assert len(p.seen("/kv/watch")) == 1, "the watch asked more than once"

    # Timed out: the key as it is.
    for timeout in (0, 0.05, datetime.timedelta(milliseconds=50)):
        assert c.kv_watch("k", first.version, timeout) == raftmaster.KVWatchResult(True, b"one", first.version, True)
    assert c.kv_watch("absent", timeout=0) == raftmaster.KVWatchResult(False, None, 0, True)
    # A key that already differs answers at once.
    assert c.kv_watch("k", first.version + 1000, timeout=30).value == b"one"

    got.clear()
    watcher = threading.Thread(target=lambda: got.append(c.kv_watch("k", first.version, timeout=30)))
    before = len(p.seen("/kv/watch"))
    watcher.start()
    wait_until(lambda: len(p.seen("/kv/watch")) > before, "the second watch at the leader")
    second = other.kv_cas("k", first.version, b"two")
    watcher.join(60)
    assert got == [raftmaster.KVWatchResult(True, b"two", second.version, False)]

    other.kv_delete("k")
    assert c.kv_watch("k", second.version, timeout=30) == raftmaster.KVWatchResult(False, None, 0, False)

    with pytest.raises(raftmaster.Invalid):
        c.kv_watch("two words", timeout=0)
    with pytest.raises(ValueError):
        c.kv_watch("k", -1)
