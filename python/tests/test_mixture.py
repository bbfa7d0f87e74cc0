"""Weighted mixtures (protocol level 9): the client's checks of sources,
weights and schedules, and the requests it builds, without a server; then
a mixture of three sources on a real cluster: tasks of one source each,
handed out by the deficit over records, weight changes from the next
task, a schedule keyed by the records consumed, exact per-source counts
and the errors of bad requests."""

import json
import math
import os

import pytest

import raftmaster
from raftmaster import _transport
from raftmaster.client import _schedule_body, _sources_body, _weights_body
from cluster import wait_until
from conftest import write_dataset
from test_sessions import FakeSessions
from test_transport import TASK, recording_waits

# The answer to a weight change, as rpc.SetWeightsResponse writes it.
WEIGHTS = {"sources": [
    {"name": "web", "weight": 0.4, "pass": 1, "tasks": 10, "todo": 3, "pending": 1, "done": 6, "failed": 0,
     "records": 96, "finished": 16, "globs": ["/data/web/*.recordio"]},
    {"name": "code", "weight": 0.4, "pass": 0, "tasks": 8, "todo": 2, "pending": 0, "done": 6, "failed": 0,
     "records": 36, "finished": 6, "globs": ["/data/code/*.recordio"]},
    {"name": "books", "weight": 0.2, "pass": 0, "tasks": 4, "todo": 3, "pending": 0, "done": 1, "failed": 0,
     "records": 6, "finished": 1},
], "schedule": [{"at_records": 1000, "weights": {"books": 0.5}}]}

SOURCES = [("web", 0.5, "/data/web/*.recordio"), ("code", 0.3, ["/data/code/*.recordio"]),
           ("books", 0.2, ["/data/books/a-*.recordio", "/data/books/b-*.recordio"])]
SOURCES_BODY = [
    {"name": "web", "weight": 0.5, "globs": ["/data/web/*.recordio"]},
    {"name": "code", "weight": 0.3, "globs": ["/data/code/*.recordio"]},
    {"name": "books", "weight": 0.2, "globs": ["/data/books/a-*.recordio", "/data/books/b-*.recordio"]},
]


# The request bodies.


def test_sources_as_triples_or_dicts_make_the_same_request_body():
    assert _sources_body(SOURCES) == SOURCES_BODY
    dicts = [{"name": n, "weight": w, "globs": g} for n, w, g in SOURCES]
    assert _sources_body(dicts) == SOURCES_BODY
    # Any iterable of them; integer weights are sent as numbers too.
    assert _sources_body(iter([["only", 3, ("/a/*",)]])) == [{"name": "only", "weight": 3.0, "globs": ["/a/*"]}]
    # A weight of 0 is allowed while another reads.
    assert _sources_body([("a", 0, "/a"), ("b", 1, "/b")])[0]["weight"] == 0.0
    # Names of every allowed character, up to 64.
    name = "Ab9_-." + "x" * 58
    assert _sources_body([(name, 1, "/a")])[0]["name"] == name
    assert len(_sources_body([("s%d" % k, 1, "/d%d/*" % k) for k in range(raftmaster.client.MAX_SOURCES)])) == 16


def test_weights_and_schedules_make_their_request_bodies():
    assert _weights_body("set_weights", {"web": 0.4, "code": 0.4, "books": 0.2}) == {
        "web": 0.4, "code": 0.4, "books": 0.2}
    assert _weights_body("set_weights", {"web": 4000}) == {"web": 4000.0}
    steps = [(0, {"web": 1}), {"at_records": 1000, "weights": {"books": 0.5, "web": 0.25}}, (10**12, {"code": 2})]
    assert _schedule_body(steps) == [
        {"at_records": 0, "weights": {"web": 1.0}},
        {"at_records": 1000, "weights": {"books": 0.5, "web": 0.25}},
        {"at_records": 10**12, "weights": {"code": 2.0}},
    ]
    assert _schedule_body([]) == []


@pytest.mark.parametrize("sources, message", [
    ([], "sources is empty"),
    ("web=0.5:/data/web/*", "want a list of (name, weight, globs)"),
    ({"name": "web", "weight": 1, "globs": "/a"}, "want a list of (name, weight, globs)"),
    (42, "want a list of (name, weight, globs)"),
    ([("web", 1)], "source 0 ('web', 1): want (name, weight, globs)"),
    (["web"], "source 0 'web': want (name, weight, globs)"),
    ([{"name": "web", "weight": 1}], "want the keys name, weight, globs; missing: globs"),
    ([{"name": "web", "weight": 1, "globs": "/a", "seed": 3}], "unknown: 'seed'"),
    ([("", 1, "/a")], "source name '': want 1 to 64 characters"),
    ([("x" * 65, 1, "/a")], "want 1 to 64 characters"),
    ([("web data", 1, "/a")], "source name 'web data': only letters, digits, '_', '-' and '.'"),
    ([("web/1", 1, "/a")], "only letters, digits"),
    ([(7, 1, "/a")], "source name 7 is not a string"),
    ([("web", 1, "/a"), ("web", 2, "/b")], "source 'web' is named twice"),
    ([("web", -0.5, "/a")], "source 'web': weight -0.5 out of range [0, 4000]"),
    ([("web", 4000.5, "/a")], "weight 4000.5 out of range [0, 4000]"),
    ([("web", math.nan, "/a")], "weight nan out of range"),
    ([("web", math.inf, "/a")], "weight inf out of range"),
    ([("web", "0.5", "/a")], "source 'web': weight '0.5' is not a number"),
    ([("web", True, "/a")], "weight True is not a number"),
    ([("web", None, "/a")], "weight None is not a number"),
    ([("web", 1, [])], "source 'web' has no glob pattern"),
    ([("web", 1, "")], "glob '' is not a non-empty string"),
    ([("web", 1, ["/a", None])], "glob None is not a non-empty string"),
    ([("web", 1, 5)], "globs 5: want a pattern or a list of patterns"),
    ([("web", 1, b"/a")], "want a pattern or a list of patterns"),
    ([("web", 0, "/a"), ("code", 0.0, "/b")], "every source has weight 0"),
    # Weights count in millionths: this one is 0 to the cluster.
    ([("web", 1e-9, "/a")], "every source has weight 0"),
    ([("s%d" % k, 1, "/a") for k in range(17)], "17 sources, more than 16"),
])
def test_bad_sources_raise_a_clear_value_error(sources, message):
    with pytest.raises(ValueError) as e:
        _sources_body(sources)
    assert message in str(e.value)
    assert str(e.value).startswith("raftmaster client: set_dataset: ")


@pytest.mark.parametrize("weights, message", [
    ({}, "weights name no source"),
    ([("web", 0.4)], "want a dict of source name to weight"),
    ("web=0.4", "want a dict of source name to weight"),
    ({"": 1}, "source name '': want 1 to 64 characters"),
    ({"web data": 1}, "only letters, digits"),
    ({"web": -1}, "source 'web': weight -1 out of range [0, 4000]"),
    ({"web": 5000}, "out of range"),
    ({"web": math.nan}, "out of range"),
    ({"web": "high"}, "weight 'high' is not a number"),
    ({"web": False}, "weight False is not a number"),
    ({"s%d" % k: 1 for k in range(17)}, "17 weights, more than 16 sources"),
])
def test_bad_weights_raise_a_clear_value_error(weights, message):
    with pytest.raises(ValueError) as e:
        _weights_body("set_weights", weights)
    assert message in str(e.value) and str(e.value).startswith("raftmaster client: set_weights: ")


@pytest.mark.parametrize("steps, message", [
    ({"at_records": 0, "weights": {"web": 1}}, "want a list of (at_records, {name: weight})"),
    ("0:web=1", "want a list of"),
    ([(100, {"web": 1}), (100, {"code": 1})], "step 1: at 100 records, not after the step before (100)"),
    ([(200, {"web": 1}), (100, {"code": 1})], "step 1: at 100 records, not after the step before (200)"),
    ([(-1, {"web": 1})], "step 0: at_records -1 is not an integer >= 0"),
    ([(1.5, {"web": 1})], "at_records 1.5 is not an integer"),
    ([(True, {"web": 1})], "at_records True is not an integer"),
    ([(0, {})], "step 0: weights name no source"),
    ([(0, {"web": -2})], "step 0: source 'web': weight -2 out of range"),
    ([(0, [("web", 1)])], "step 0: weights [('web', 1)]: want a dict"),
    ([(0, {"web": 1}, "extra")], "step 0 (0, {'web': 1}, 'extra'): want (at_records, {name: weight})"),
    ([{"at": 0, "weights": {"web": 1}}], "want the keys at_records, weights; missing: at_records; unknown: 'at'"),
    ([(k, {"web": 1}) for k in range(65)], "65 steps, more than 64"),
])
def test_bad_schedules_raise_a_clear_value_error(steps, message):
    with pytest.raises(ValueError) as e:
        _schedule_body(steps)
    assert message in str(e.value) and str(e.value).startswith("raftmaster client: set_weight_schedule: ")


# The client's requests and answers, against a fake server.


def test_set_dataset_with_sources_sends_them_in_place_of_globs(fake, clients):
    s = fake([(200, {}, {"ignored": False, "files": 4, "chunks": 40, "tasks": 20, "shuffle": True, "seed": 9})])
    c = clients([s.addr], job="mix", retry=0)
    res = c.set_dataset(sources=SOURCES, chunks_per_task=2, seed=9)
    assert (res.ignored, res.tasks, res.seed) == (False, 20, 9)
    [req] = s.requests
    assert (req["method"], req["path"]) == ("POST", "/v1/jobs/mix/dataset")
    assert json.loads(req["body"]) == {"sources": SOURCES_BODY, "chunks_per_task": 2, "seed": 9}
    assert req["headers"][_transport.HEADER_REQUEST_ID].startswith(str(c.id) + "/")


def test_bad_dataset_arguments_send_nothing(fake, clients):
    s = fake([(200, {}, {})])
    c = clients([s.addr], retry=0)
    with pytest.raises(ValueError, match="give paths or sources, not both"):
        c.set_dataset(["/data/*.recordio"], sources=SOURCES)
    with pytest.raises(ValueError, match=r"give paths \(glob patterns\) or sources"):
        c.set_dataset()
    with pytest.raises(ValueError, match="sources is empty"):
        c.set_dataset(sources=[])
    with pytest.raises(ValueError, match="every source has weight 0"):
        c.set_dataset(sources=[("a", 0, "/a")])
    indexing = clients([s.addr], retry=0, client_indexing=True)
    with pytest.raises(ValueError, match="the leader indexes a mixture's sources.*client_indexing"):
        indexing.set_dataset(sources=SOURCES)
    # Nor does it index an object store: the leader does.
    with pytest.raises(ValueError, match="indexes local files only.*s3://bucket"):
        indexing.set_dataset("s3://bucket/train-*.recordio")
    with pytest.raises(ValueError, match="set_weights: weights name no source"):
        c.set_weights({})
    with pytest.raises(ValueError, match="not after the step before"):
        c.set_weight_schedule([(5, {"web": 1}), (5, {"web": 2})])
    assert s.requests == []


def test_set_weights_is_a_write_of_the_job_outside_the_session(fake, clients):
    sessions = FakeSessions()
    s = fake([(503, {}, {"code": "unknown_outcome", "message": "lost"}), (200, {}, WEIGHTS)], sessions)
    c = clients([s.addr], job="mix", retry=60)
    waits = recording_waits(c)
    m = c.set_weights({"web": 0.4, "code": 0.4, "books": 0.2})
    # Retried with one request id, under the client's own identity: no
    # session was opened for it.
    assert len(s.requests) == 2 and len(waits) == 1
    ids = {r["headers"][_transport.HEADER_REQUEST_ID] for r in s.requests}
    assert len(ids) == 1 and ids.pop().startswith(str(c.id) + "/")
    assert all(_transport.HEADER_SESSION not in r["headers"] for r in s.requests)
    assert s.session_requests == [] and c.session_id is None
    assert {(r["method"], r["path"]) for r in s.requests} == {("POST", "/v1/jobs/mix/weights")}
    assert json.loads(s.requests[0]["body"]) == {"weights": {"web": 0.4, "code": 0.4, "books": 0.2}}
    # The answer, typed.
    assert m.weights == {"web": 0.4, "code": 0.4, "books": 0.2}
    web = m.sources[0]
    assert (web.name, web.pass_id, web.tasks, web.todo, web.pending, web.done, web.records, web.finished) == (
        "web", 1, 10, 3, 1, 6, 96, 16)
    assert web.globs == ("/data/web/*.recordio",) and m.sources[2].globs == ()
    assert m.schedule == (raftmaster.WeightStep(1000, {"books": 0.5}),)
    assert m.records == 96 + 36 + 6  # the sources' own, when the answer gives none


def test_the_default_job_s_weights_and_the_schedule_s_requests(fake, clients):
    s = fake([(200, {}, WEIGHTS)])
    c = clients([s.addr], retry=0)
    c.set_weight_schedule([(1000, {"books": 0.5}), {"at_records": 5000, "weights": {"books": 0.2, "web": 0.6}}])
    c.set_weight_schedule([])
    c.call("/v1/weights", {"weights": {"web": 1}})
    assert [r["path"] for r in s.requests] == ["/v1/weights"] * 3
    assert [json.loads(r["body"]) for r in s.requests] == [
        {"replace_schedule": True, "schedule": [{"at_records": 1000, "weights": {"books": 0.5}},
                                                {"at_records": 5000, "weights": {"books": 0.2, "web": 0.6}}]},
        {"replace_schedule": True},
        {"weights": {"web": 1}},
    ]
    assert all(_transport.HEADER_SESSION not in r["headers"] for r in s.requests)


def test_a_task_carries_its_source_and_the_job_describes_its_mixture(fake, clients):
    mixed = dict(TASK, task=dict(TASK["task"], source="code"))
    job = dict(WEIGHTS, name="mix", has_dataset=True, tasks=22, records=140)
    s = fake([(200, {}, mixed), (200, {}, TASK), (200, {}, job), (200, {}, {"fsm": {}}), (200, {}, job)])
    c = clients([s.addr], job="mix", retry=0, session_ttl=0)
    assert c.get_task(0).source == "code"
    assert c.get_task(0).source is None  # a dataset of one source
    m = c.mixture()
    assert s.requests[-1]["method"] == "GET" and s.requests[-1]["path"] == "/v1/jobs/mix"
    assert [x.name for x in m.sources] == ["web", "code", "books"] and m.records == 140
    assert m.schedule[0].at_records == 1000
    fsm = c.status()["fsm"]
    assert [x["name"] for x in fsm["sources"]] == ["web", "code", "books"]
    assert fsm["schedule"] == WEIGHTS["schedule"] and fsm["records"] == 140


def test_the_description_of_a_job_of_one_source_has_no_mixture(fake, clients):
    s = fake([(200, {}, {"name": "plain", "has_dataset": True, "tasks": 4})])
    c = clients([s.addr], job="plain", retry=0)
    assert c.mixture() == raftmaster.Mixture()
    fsm = c.status()["fsm"]
    assert (fsm["sources"], fsm["schedule"], fsm["records"]) == ([], [], 0)
    fsm["sources"].append("changed")
    assert c.status()["fsm"]["sources"] == []
    # The default job is described by name.
    d = clients([s.addr], retry=0)
    d.mixture()
    assert s.requests[-1]["path"] == "/v1/jobs/default"


# A mixture on a real cluster.


@pytest.fixture(scope="session")
def mixture_cluster(cluster):
    """The shared cluster once it has raised its protocol level to
    mixtures'."""
    with raftmaster.Client(cluster.addrs, retry=30, session_ttl=0) as c:
        wait_until(lambda: c.protocol() >= raftmaster.MIXTURE_PROTOCOL, "protocol level %d"
                   % raftmaster.MIXTURE_PROTOCOL)
    return cluster


NAMES = ("web", "code", "books")


@pytest.fixture
def sources(tmp_path):
    """Three sources of one file of 60 records each, in chunks of 3: with
    chunks_per_task 2, 10 tasks of 6 records each."""
    out = {}
    for name in NAMES:
        d = tmp_path / name
        d.mkdir()
        write_dataset(d, files=1, records=60, prefix=name)
        out[name] = str(d)
    return out


def source_of(task, dirs):
    """The source whose directory holds every chunk of task."""
    found = {name for name, d in dirs.items() for ch in task.chunks
             if os.path.realpath(os.path.dirname(ch.path)) == os.path.realpath(d)}
    assert len(found) == 1, (task, found)
    return found.pop()


def deficit_order(weights, n, shares=None):
    """The sources of the next n tasks, of equal record counts, as
    fsm/mixture.go describes the choice: the least (share + next) /
    weight, ties to the first source, a source of weight 0 never."""
    shares = dict(shares or {name: 0 for name in weights})
    out = []
    for _ in range(n):
        name = min((s for s in weights if weights[s] > 0), key=lambda s: (shares[s] + 1) / weights[s])
        shares[name] += 1
        out.append(name)
    return out


def lease(c, n, dirs):
    """Lease n tasks of pass 0; each is of the source it names."""
    tasks = [c.get_task(0) for _ in range(n)]
    for t in tasks:
        assert t.source == source_of(t, dirs), t
        assert t.record_count == 6, t
    return tasks


def test_a_mixture_of_three_sources_follows_its_weights(mixture_cluster, make_client, sources):
    c = make_client()
    res = c.set_dataset(sources=[(n, w, os.path.join(sources[n], "*.recordio"))
                                 for n, w in zip(NAMES, (0.5, 0.3, 0.2))], chunks_per_task=2, seed=7)
    assert (res.ignored, res.files, res.chunks, res.tasks) == (False, 3, 60, 30)
    m = c.mixture()
    assert [(s.name, s.tasks, s.todo, s.pass_id) for s in m.sources] == [(n, 10, 10, 0) for n in NAMES]
    assert m.weights == pytest.approx({"web": 0.5, "code": 0.3, "books": 0.2})
    assert m.sources[0].globs == (os.path.join(sources["web"], "*.recordio"),)

    # Leased and not yet finished, the tasks count in their sources' shares:
    # every prefix of the leases follows the weights to within one task.
    weights = {"web": 0.5, "code": 0.3, "books": 0.2}
    tasks = lease(c, 10, sources)
    assert [t.source for t in tasks] == deficit_order(weights, 10)
    for k in range(1, 11):
        for name, w in weights.items():
            assert abs(sum(t.source == name for t in tasks[:k]) - w * k) <= 1
    for t in tasks:
        c.task_finished(t)

    # Exact per-source counts; a task finished twice counts once.
    c.task_finished(tasks[0])
    m = c.mixture()
    assert [(s.name, s.finished, s.records, s.done) for s in m.sources] == [
        ("web", 5, 30, 5), ("code", 3, 18, 3), ("books", 2, 12, 2)]
    assert m.records == 60

    # Another trainer sets nothing more, whatever it asks.
    again = make_client().set_dataset(sources=[("web", 1, os.path.join(sources["web"], "*.recordio"))])
    assert again.ignored
    assert [s.records for s in c.mixture().sources] == [30, 18, 12]


def test_set_weights_takes_effect_from_the_next_task_and_changes_the_job_description(
        mixture_cluster, make_client, sources):
    c = make_client()
    c.set_dataset(sources=[{"name": n, "weight": w, "globs": [os.path.join(sources[n], "*.recordio")]}
                           for n, w in zip(NAMES, (0.5, 0.3, 0.2))], chunks_per_task=2)
    for t in lease(c, 10, sources):
        c.task_finished(t)

    m = c.set_weights({"web": 0.4, "code": 0.4, "books": 0.2})
    assert m.weights == pytest.approx({"web": 0.4, "code": 0.4, "books": 0.2})
    assert c.mixture().weights == pytest.approx(m.weights)
    fsm = c.status()["fsm"]
    assert {s["name"]: s["weight"] for s in fsm["sources"]} == pytest.approx(m.weights)
    assert fsm["records"] == 60

    # Equal weights from the next task, the past not paid back: web, read
    # most so far, comes first again.
    m = c.set_weights({"web": 1, "code": 1, "books": 1})
    assert m.weights == pytest.approx({"web": 1.0, "code": 1.0, "books": 1.0})
    tasks = lease(c, 6, sources)
    assert [t.source for t in tasks] == ["web", "code", "books"] * 2
    for t in tasks:
        c.task_finished(t)
    # A source of weight 0 is not read; the others keep theirs.
    c.set_weights({"web": 0})
    tasks = lease(c, 2, sources)
    assert [t.source for t in tasks] == ["code", "books"]
    for t in tasks:
        c.task_finished(t)
    m = c.mixture()
    assert m.weights == pytest.approx({"web": 0.0, "code": 1.0, "books": 1.0})
    assert [(s.name, s.records) for s in m.sources] == [("web", 42), ("code", 36), ("books", 30)]
    assert m.records == 108


def test_a_weight_schedule_is_keyed_by_the_records_consumed(mixture_cluster, make_client, sources):
    c = make_client()
    c.set_dataset(sources=[(n, 1, os.path.join(sources[n], "*.recordio")) for n in NAMES], chunks_per_task=2)
    m = c.set_weight_schedule([(12, {"web": 0, "code": 0}), (30, {"web": 2})])
    assert m.schedule == (raftmaster.WeightStep(12, {"web": 0.0, "code": 0.0}),
                          raftmaster.WeightStep(30, {"web": 2.0}))
    assert c.mixture().schedule == m.schedule
    # Two tasks of 6 records reach the first step: only books is read then.
    tasks = lease(c, 2, sources)
    assert [t.source for t in tasks] == ["web", "code"]
    for t in tasks:
        c.task_finished(t)
    m = c.mixture()
    assert m.weights == pytest.approx({"web": 0.0, "code": 0.0, "books": 1.0})
    assert m.schedule == (raftmaster.WeightStep(30, {"web": 2.0}),) and m.records == 12
    tasks = lease(c, 3, sources)
    assert [t.source for t in tasks] == ["books"] * 3
    for t in tasks:
        c.task_finished(t)
    # 30 records: web 2, books 1, the shares counted again from 0.
    m = c.mixture()
    assert m.weights == pytest.approx({"web": 2.0, "code": 0.0, "books": 1.0}) and m.schedule == ()
    assert [t.source for t in lease(c, 3, sources)] == deficit_order({"web": 2, "code": 0, "books": 1}, 3)
    # An empty schedule clears it.
    c.set_weight_schedule([(1000, {"code": 1})])
    assert c.set_weight_schedule([]).schedule == () and c.mixture().schedule == ()


def test_each_source_cycles_through_its_own_passes(mixture_cluster, make_client, sources):
    c = make_client()
    c.set_dataset(sources=[(n, w, os.path.join(sources[n], "*.recordio")) for n, w in zip(NAMES, (1, 0, 0))],
                  chunks_per_task=2)
    tasks = lease(c, 10, sources)
    assert {t.source for t in tasks} == {"web"}
    assert len({t.meta.id for t in tasks}) == 10
    for t in tasks:
        c.task_finished(t)
    m = c.mixture()
    assert [(s.name, s.pass_id, s.finished) for s in m.sources] == [("web", 1, 10), ("code", 0, 0), ("books", 0, 0)]
    # The job's pass is the least of its sources'.
    assert c.status()["fsm"]["pass"] == 0


def test_bad_mixture_requests_raise_and_change_nothing(mixture_cluster, make_client, sources, job):
    c = make_client()
    c.set_dataset(sources=[(n, w, os.path.join(sources[n], "*.recordio")) for n, w in zip(NAMES, (0.5, 0.3, 0.2))],
                  chunks_per_task=2)
    before = c.mixture()
    with pytest.raises(raftmaster.Invalid, match="nosuch"):
        c.set_weights({"nosuch": 1})
    with pytest.raises(raftmaster.Invalid, match="weight 0"):
        c.set_weights({"web": 0, "code": 0, "books": 0})
    with pytest.raises(raftmaster.Invalid, match="nosuch"):
        c.set_weight_schedule([(100, {"nosuch": 1})])
    with pytest.raises(raftmaster.Invalid, match="weight 0"):
        c.set_weight_schedule([(100, {"web": 0}), (200, {"code": 0, "books": 0})])
    assert c.mixture() == before

    # A cursor keeps the mixture's position: after more reading and a
    # weight change, a restore puts its counts and weights back.
    for _ in range(5):
        c.task_finished(c.get_task(0))
    at = c.mixture()
    cursor = c.commit_cursor(1)
    for _ in range(7):
        c.task_finished(c.get_task(0))
    c.set_weights({"web": 3})
    assert c.mixture() != at
    c.restore_cursor(cursor.id)
    assert c.mixture() == at

    # A job of one source has no weights to change, and reads without a source.
    plain = make_client(job=job + "-plain")
    plain.set_dataset(os.path.join(sources["web"], "*.recordio"), chunks_per_task=2)
    with pytest.raises(raftmaster.Invalid, match="one source"):
        plain.set_weights({"web": 1})
    assert plain.get_task(0).source is None
    assert plain.mixture() == raftmaster.Mixture()
    # A job without a dataset has none either.
    empty = make_client(job=job + "-empty")
    empty.create_job(job + "-empty")
    with pytest.raises(raftmaster.NoDataset):
        empty.set_weights({"web": 1})
