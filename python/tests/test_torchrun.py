"""python -m raftmaster.torchrun: torchrun agents that rendezvous through a
real 3-node cluster and start workers that all_reduce with gloo, also
across the SIGKILL of the cluster's leader in the middle of the rendezvous,
and the SIGKILL of an agent with its worker, after which the survivors
rendezvous again and the tasks the dead worker held come back to the job."""

import json
import os
import pickle
import re
import signal
import subprocess
import sys

import pytest

import raftmaster
from cluster import REPO, Cluster, wait_until

torch = pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")

from raftmaster import torch_rendezvous as tr  # noqa: E402
from raftmaster.torchrun import torchrun_args  # noqa: E402

ALL_REDUCE = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank %d of %d: all_reduce %g" % (dist.get_rank(), dist.get_world_size(), t.item()), flush=True)
dist.destroy_process_group()
"""


class Launcher:
    """One "python -m raftmaster.torchrun" process (an agent and its worker),
    running all_reduce.py, or another script with its arguments, with more
    options of torchrun's."""

    def __init__(self, tmp_path, name, endpoints, run_id, nnodes, script=("all_reduce.py", ALL_REDUCE),
                 script_args=(), options=()):
        script_name, text = script
        script = tmp_path / script_name
        if not script.exists():
            script.write_text(text)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python")] + (
            [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        self.out, self.err = tmp_path / (name + ".out"), tmp_path / (name + ".err")
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "raftmaster.torchrun", "--nnodes", str(nnodes), "--nproc-per-node", "1",
                 "--rdzv-backend", "raftmaster", "--rdzv-endpoint", ",".join(endpoints), "--rdzv-id", run_id,
                 "--monitor-interval", "0.5"] + list(options) + [str(script)] + list(script_args),
                stdout=out, stderr=err, env=env, cwd=str(tmp_path), start_new_session=True)

    def result(self, timeout=120.0):
        """Wait for the launcher to end; return its output, failing with its log unless it succeeded."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        out, err = self.out.read_text(), self.err.read_text()
        assert self.proc.returncode == 0, "launcher exited with %s:\n%s\n%s" % (self.proc.returncode, out, err[-6000:])
        return out

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def launchers():
    made = []
    yield made
    for launcher in made:
        launcher.kill()


def ranks(outputs, world):
    """The rank each worker printed, with the all_reduce it got: every rank's sum is 1 + ... + world."""
    got = {}
    for out in outputs:
        for m in re.finditer(r"rank (\d+) of (\d+): all_reduce (\S+)", out):
            got[int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    want = {r: (world, float(world * (world + 1) // 2)) for r in range(world)}
    assert got == want
    return got


@pytest.fixture(autouse=True)
def run_secret(monkeypatch):
    """The run's secret that signs the rendezvous state, in the launchers'
    environment: the cluster has no tokens to derive a key from."""
    monkeypatch.setenv(tr.SECRET_ENV, "secret-of-the-run-" + os.urandom(8).hex())


def rendezvous_state(client, run_id):
    got = tr.RaftmasterRendezvousBackend(client, run_id).get_state()
    return pickle.loads(got[0]) if got is not None else None


AGENTS = 4


def test_four_agents_rendezvous_and_their_workers_all_reduce(store_cluster, job, tmp_path, launchers):
    cluster = store_cluster
    for i in range(AGENTS):
        launchers.append(Launcher(tmp_path, "agent%d" % i, cluster.addrs, job, AGENTS))
    ranks([launcher.result() for launcher in launchers], AGENTS)
    # The rendezvous was the job's register: round 0, complete, four
    # participants, and closed when the launchers ended; the last agent
    # out deleted the agents' store (the workers' master address, the
    # exit barrier), so that only the closed state stays.
    with raftmaster.Client(cluster.addrs, job=job, retry=30) as c:
        state = rendezvous_state(c, job)
        assert state.round == 0 and state.complete and state.closed and len(state.participants) == AGENTS
        assert c.kv_num_keys(tr.store_prefix(job)) == 0 and c.kv_num_keys() == 1


def test_the_rendezvous_survives_the_leaders_sigkill(tmp_path, launchers):
    c3 = Cluster(str(tmp_path / "cluster"), nodes=3).start()
    client = raftmaster.Client(c3.addrs, job="rdzv-failover", retry=60)
    try:
        for i in range(AGENTS - 1):
            launchers.append(Launcher(tmp_path, "agent%d" % i, c3.addrs, "rdzv-failover", AGENTS))

        def all_but_one_joined():
            state = rendezvous_state(client, "rdzv-failover")
            return state is not None and len(state.participants) == AGENTS - 1 and not state.complete
        wait_until(all_but_one_joined, "%d of %d agents in the rendezvous" % (AGENTS - 1, AGENTS), timeout=90,
                   every=0.1)

        # All agents but one are in the round and wait for the last: the
        # leader dies.
        leader = c3.leader()
        node = next(n for n in c3.nodes if n.api == leader)
        node.proc.kill()
        node.proc.wait(10)
        launchers.append(Launcher(tmp_path, "agent%d" % (AGENTS - 1), c3.addrs, "rdzv-failover", AGENTS))

        ranks([launcher.result() for launcher in launchers], AGENTS)
        assert c3.leader() != leader
        state = rendezvous_state(client, "rdzv-failover")
        assert state.round == 0 and state.complete and len(state.participants) == AGENTS
    finally:
        client.close()
        c3.stop()


DIES_HOLDING_A_TASK = """
import os, sys
import raftmaster

addrs, job, out = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
c = raftmaster.Client(addrs, job=job, retry=30, session_ttl=60)
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    t = c.get_task(0)
    with open(out + ".0", "w") as f:
        f.write("%d %d" % (t.meta.id, t.session))
    os._exit(1)  # dies holding the task: its session would live a minute
ids = []
while True:
    try:
        ids.append(c.get_task(0).meta.id)
    except raftmaster.NoMoreAvailable:
        break
with open(out + ".1", "w") as f:
    f.write(" ".join(str(i) for i in ids))
c.close()
"""


def test_the_agent_closes_the_sessions_of_a_worker_that_died(session_cluster, job, tmp_path, launchers, dataset):
    """A worker dies holding a task under a session of a minute's TTL; the
    agent, restarting its workers, closes the session, so that the next
    worker leases that task at once."""
    cluster = session_cluster
    with raftmaster.Client(cluster.addrs, job=job, retry=30, session_ttl=0) as c:
        tasks = c.set_dataset(dataset[0], chunks_per_task=10, task_timeout=600).tasks
    out = str(tmp_path / "leased")
    launchers.append(Launcher(tmp_path, "agent", cluster.addrs, job, 1,
                              script=("dies_holding_a_task.py", DIES_HOLDING_A_TASK),
                              script_args=[",".join(cluster.addrs), job, out], options=["--max-restarts", "1"]))
    launchers[0].result()
    with open(out + ".0") as f:
        held, session = (int(v) for v in f.read().split())
    with open(out + ".1") as f:
        again = [int(v) for v in f.read().split()]
    assert session > 0
    assert sorted(again) == list(range(1, tasks + 1)) and held in again


# A worker of the elastic run below. Until the test has killed an agent
# (the file killed exists) it leases one task of pass 0 under its session,
# says which, and all_reduces with its peers until one of them dies; after,
# it all_reduces once (the survivors' world) and reads the rest of the pass,
# until it is over. Every lease is a line of JSON in the log.
ELASTIC_READER = """
import datetime, json, os, sys, time
import torch
import torch.distributed as dist
import raftmaster

addrs, job, log, killed = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
c = raftmaster.Client(addrs, job=job, retry=30, session_ttl=5)


def record(**kw):
    kw.update(rank=rank, world=world, agent=os.getppid(), pid=os.getpid())
    with open(log, "a") as f:
        f.write(json.dumps(kw) + "\\n")


end = time.monotonic() + 300
if not os.path.exists(killed):
    t = c.get_task(0)
    record(held=t.meta.id, session=t.session)
    while time.monotonic() < end:  # until a peer dies
        dist.all_reduce(torch.zeros(1))
        time.sleep(0.2)
    sys.exit("no peer died")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print("rank %d of %d: all_reduce %g" % (rank, world, t.item()), flush=True)
while time.monotonic() < end:
    try:
        t = c.get_task(0)
    except raftmaster.NoMoreAvailable:  # the rest is held, by a peer or by a session that has not ended yet
        time.sleep(0.2)
        continue
    except raftmaster.PassBefore:  # every task of the pass is done
        break
    record(leased=t.meta.id, session=t.session)
    c.task_finished(t)
else:
    sys.exit("pass 0 not over")
c.close()
dist.destroy_process_group()
"""


def leases(log):
    """The lines of the elastic workers' log."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_the_survivors_of_an_agents_sigkill_rendezvous_again_and_its_tasks_come_back(
        session_cluster, job, tmp_path, launchers, dataset):
    """Four elastic agents (--nnodes 3:4) whose workers each hold a task
    under a session; one agent dies with its worker (SIGKILL of both, as
    when its machine dies). The survivors' workers fail, their agents
    rendezvous again without it, and their workers read the rest of the
    pass, the dead worker's task included: it came back when its session
    ended, ten minutes before the end of its lease."""
    cluster = session_cluster
    with raftmaster.Client(cluster.addrs, job=job, retry=30, session_ttl=0) as c:
        tasks = c.set_dataset(dataset[0], chunks_per_task=4, task_timeout=600, failure_max=5).tasks
        assert tasks >= AGENTS
        log, killed = tmp_path / "leases.jsonl", tmp_path / "killed"
        for i in range(AGENTS):
            launchers.append(Launcher(tmp_path, "agent%d" % i, cluster.addrs, job, "%d:%d" % (AGENTS - 1, AGENTS),
                                      script=("elastic_reader.py", ELASTIC_READER),
                                      script_args=[",".join(cluster.addrs), job, str(log), str(killed)],
                                      options=["--max-restarts", "3", "--rdzv-conf", "last_call_timeout=2"]))
        by_pid = {launcher.proc.pid: launcher for launcher in launchers}

        # The round of four runs: each worker holds its task under its
        # session (a round of three before the last agent joined had its
        # workers stopped and their sessions closed).
        holders = {}

        def four_hold():
            holders.clear()
            for r in leases(log):
                if "held" in r and r["world"] == AGENTS:
                    holders[r["agent"]] = r
            if len(holders) < AGENTS:
                return False
            held = {s["session"]: [t["meta"]["id"] for t in s.get("tasks") or []] for s in c.sessions()}
            return all(held.get(r["session"]) == [r["held"]] for r in holders.values())
        wait_until(four_hold, "four workers holding a task each", timeout=150, every=0.2)
        assert set(holders) == set(by_pid)

        victim = next(r for r in holders.values() if r["rank"] == 0)
        killed.write_text("")
        by_pid[victim["agent"]].kill()
        survivors = [launcher for pid, launcher in by_pid.items() if pid != victim["agent"]]

        # Well within the task's lease of ten minutes: only the end of the
        # dead worker's session can have handed its task back.
        ranks([launcher.result(timeout=240) for launcher in survivors], AGENTS - 1)
        read = [r for r in leases(log) if "leased" in r]
        assert sorted({r["leased"] for r in read}) == list(range(1, tasks + 1))
        again = [r for r in read if r["leased"] == victim["held"]]
        assert again and all(r["session"] not in (0, victim["session"]) and r["agent"] != victim["agent"]
                             for r in again)
        assert {r["world"] for r in read} == {AGENTS - 1}
        assert victim["session"] not in {s["session"] for s in c.sessions()}
        state = rendezvous_state(c, job)
        assert state.complete and len(state.participants) == AGENTS - 1


def test_torchruns_options_may_be_spelt_with_hyphens():
    from torch.distributed.run import get_args_parser
    parser = get_args_parser()
    argv = ["--nnodes", "1:2", "--nproc-per-node=2", "--rdzv-backend", "raftmaster", "--rdzv_id", "x", "-r3",
            "--max-restarts", "1", "-m", "pkg.train", "--nproc-per-node", "stays", "--lr=0.1"]
    translated = torchrun_args(parser, argv)
    assert translated == ["--nnodes", "1:2", "--nproc_per_node=2", "--rdzv_backend", "raftmaster", "--rdzv_id", "x",
                          "-r3", "--max_restarts", "1", "-m", "pkg.train", "--nproc-per-node", "stays", "--lr=0.1"]
    args = parser.parse_args(translated)
    assert (args.nproc_per_node, args.rdzv_backend, args.max_restarts, args.module) == ("2", "raftmaster", 1, True)
    assert args.training_script == "pkg.train"
    assert args.training_script_args == ["--nproc-per-node", "stays", "--lr=0.1"]
