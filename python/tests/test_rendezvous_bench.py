"""The simulated-scale rendezvous benchmark (python/bench/rendezvous_agents.py),
run small against the test cluster: every agent completes each round, in
one round of the rendezvous with distinct ranks, each agent under a
session of its own."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

BENCH = os.path.join(os.path.dirname(__file__), "..", "bench", "rendezvous_agents.py")


def test_every_agent_completes_the_round_with_a_rank_of_its_own(session_cluster, job, tmp_path):
    out = tmp_path / "bench.json"
    agents = 20
    proc = subprocess.run(
        [sys.executable, BENCH, "--addrs", ",".join(session_cluster.addrs), "--job", job, "--agents", str(agents),
         "--rounds", "2", "--wait", "1", "--secret", "bench-test", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    text = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    report = json.loads(out.read_text())
    assert not report["failed"]
    sessions = report["sessions"]
    assert len(sessions) == agents and None not in sessions and len(set(sessions)) == agents
    assert len(report["rounds"]) == 2
    for r in report["rounds"]:
        outcomes = r["agents"]
        assert len(outcomes) == agents
        assert all(o["error"] == "" for o in outcomes)
        assert len({o["round"] for o in outcomes}) == 1
        assert sorted(o["rank"] for o in outcomes) == list(range(agents))
        assert all(o["world"] == agents for o in outcomes)
        assert r["sets_won"] >= agents and r["seconds"] > 0
    wait = report["wait"]
    assert not wait["errors"] and wait["leader_requests_per_second"] > 0
    assert "time for a round of %d agents" % agents in text
