"""The package's ``torchrun.handlers`` entry point, by which stock torchrun
(the releases that read it) finds ``--rdzv-backend raftmaster``: the
package is built from pyproject.toml and installed into a venv, offline,
and agents in that venv load the entry point exactly as torch's registry
loads rendezvous plugins, then complete a rendezvous on a real cluster
with the handlers it creates."""

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

import raftmaster
from cluster import REPO

torch = pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")

from raftmaster import torch_rendezvous as tr  # noqa: E402

# One agent, run by the venv's interpreter. Newer torch discovers
# rendezvous plugins at the end of the rendezvous package's __init__
# (registry.py, _register_out_of_tree_handlers): for each entry point of
# the group "torchrun.handlers", it looks the entry point up by name, loads
# it, calls what it loaded without arguments and registers the result under
# the entry point's name. The agent makes torch 1.13's __init__ end the
# same way, so that the entry point is loaded at the same moment, the
# package half imported; where torch would only log a warning, a failure
# here ends the agent. It then asks the registry for the handler of
# --rdzv-backend raftmaster, as torchrun does, and goes through a
# rendezvous with it.
AGENT = r"""
import importlib.machinery
import json
import sys
from importlib.metadata import entry_points

RENDEZVOUS = "torch.distributed.elastic.rendezvous"
DISCOVER = '''
from importlib.metadata import entry_points as _entry_points
_discovered = _entry_points(group="torchrun.handlers")
for _handler_generator in _discovered:
    _get_handler = _discovered[_handler_generator.name].load()
    rendezvous_handler_registry.register(_handler_generator.name, _get_handler())
'''


class DiscoveringLoader(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):
        return compile(self.get_source(fullname) + DISCOVER, self.path, "exec")


class DiscoveringFinder:
    def find_spec(self, name, path, target=None):
        if name != RENDEZVOUS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = DiscoveringLoader(spec.loader.name, spec.loader.path)
        return spec


sys.meta_path.insert(0, DiscoveringFinder())
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.api import rendezvous_handler_registry as handler_registry
assert isinstance(sys.modules[RENDEZVOUS].__spec__.loader, DiscoveringLoader)

endpoint, run_id, name = sys.argv[1:4]
params = RendezvousParameters(backend="raftmaster", endpoint=endpoint, run_id=run_id, min_nodes=2, max_nodes=2,
                              join_timeout="120", read_timeout="60")
handler = handler_registry.create_handler(params)

# python -m raftmaster.torchrun registers the backend too, and may run
# where the entry point has already registered it.
from raftmaster import torch_rendezvous
torch_rendezvous.register()

got = handler.next_rendezvous()
# torch before 2.4 answers (store, rank, world size), later a RendezvousInfo.
store, rank, world = got if isinstance(got, tuple) else (got.store, got.rank, got.world_size)
# The round's store is shared: each agent reads the other's name in it.
store.set("agent/%d" % rank, name)
peer = store.get("agent/%d" % (1 - rank)).decode()
handler.shutdown()

import raftmaster
ep = entry_points(group="torchrun.handlers")["raftmaster"]
print(json.dumps({"rank": rank, "world": world, "peer": peer, "backend": handler.get_backend(),
                  "entry_point": ep.value, "distribution": ep.dist.name if ep.dist else None,
                  "package": raftmaster.__file__}), flush=True)
"""


def missing_build_tools():
    """The packages that building and installing ./python offline needs but
    this interpreter lacks."""
    return [m for m in ("pip", "setuptools", "wheel") if importlib.util.find_spec(m) is None]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv of this interpreter (its packages, torch, in view) with the
    package built from a copy of ./python by pip, offline, as a regular
    install: its dist-info, entry_points.txt included, is the real
    metadata of pyproject.toml. Returns the venv's interpreter."""
    missing = missing_build_tools()
    if missing:
        pytest.skip("building the package offline needs %s for %s (apt-get install python3-pip "
                    "python3-setuptools python3-wheel)" % (", ".join(missing), sys.executable))
    root = tmp_path_factory.mktemp("entry-point")
    # A copy, so that the build's build/ and egg-info stay out of the tree.
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, "python", name), str(src / name))
    shutil.copytree(os.path.join(REPO, "python", "raftmaster"), str(src / "raftmaster"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = clean_env()
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root / "venv")],
                   check=True, env=env, cwd=str(root))
    python = str(root / "venv" / "bin" / "python")
    build = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps",
                            "--no-cache-dir", "--disable-pip-version-check", str(src)],
                           env=env, cwd=str(root), capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, "pip install failed:\n%s\n%s" % (build.stdout, build.stderr)
    return python


def clean_env():
    """This environment without the variables that would put the
    repository's ./python or other packages on a venv's path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    return env


def test_the_installed_metadata_names_the_backend(venv):
    script = ("import json; from importlib.metadata import distribution\n"
              "d = distribution('raftmaster')\n"
              "print(json.dumps([[e.group, e.name, e.value] for e in d.entry_points]))")
    out = subprocess.run([venv, "-c", script], env=clean_env(), capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert ["torchrun.handlers", "raftmaster", "raftmaster.torch_rendezvous:handler_creator"] in json.loads(out)


def test_two_agents_rendezvous_through_the_entry_point(cluster, job, venv, tmp_path, monkeypatch):
    secret = "secret-of-the-run-" + os.urandom(8).hex()
    monkeypatch.setenv(tr.SECRET_ENV, secret)
    env = clean_env()
    env[tr.SECRET_ENV] = secret
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    procs = []
    try:
        for name in ("agent-a", "agent-b"):
            out, err = open(tmp_path / (name + ".out"), "wb"), open(tmp_path / (name + ".err"), "wb")
            with out, err:
                procs.append((name, subprocess.Popen([venv, str(script), ",".join(cluster.addrs), job, name],
                                                     stdout=out, stderr=err, env=env, cwd=str(tmp_path))))
        results = {}
        for name, proc in procs:
            try:
                proc.wait(180)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            err = (tmp_path / (name + ".err")).read_text()
            assert proc.returncode == 0, "%s exited with %s:\n%s" % (name, proc.returncode, err[-6000:])
            results[name] = json.loads((tmp_path / (name + ".out")).read_text())
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    venv_dir = os.path.dirname(os.path.dirname(venv))
    for name, r in results.items():
        # The entry point came from the installed distribution, and the
        # package from the venv, not from the repository.
        assert r["entry_point"] == "raftmaster.torch_rendezvous:handler_creator"
        assert r["distribution"] == "raftmaster"
        assert os.path.realpath(r["package"]).startswith(os.path.realpath(venv_dir) + os.sep)
        assert r["backend"] == "raftmaster" and r["world"] == 2
    assert {r["rank"] for r in results.values()} == {0, 1}
    assert results["agent-a"]["peer"] == "agent-b" and results["agent-b"]["peer"] == "agent-a"

    # One round, on the cluster: round 0, complete with both agents, closed
    # by their shutdown.
    with raftmaster.Client(cluster.addrs, job=job, retry=30) as c:
        got = tr.RaftmasterRendezvousBackend(c, job).get_state()
        assert got is not None
        state = pickle.loads(got[0])
        assert state.round == 0 and state.complete and state.closed and len(state.participants) == 2
