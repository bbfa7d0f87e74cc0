"""The job's register (kv_get, kv_cas) against a real 3-node cluster, with
a proxy that loses answers."""

import base64
import json
import uuid

import pytest

import raftmaster
from raftmaster import _transport


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
    assert ids[0] == ids[1] and ids[0].startswith(str(c.id) + "/")
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
