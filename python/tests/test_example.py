"""examples/python/train.py trains its toy model on a local 3-node cluster."""

import glob
import os
import re
import struct
import subprocess
import sys

import pytest

from cluster import REPO, binary

pytest.importorskip("torch", reason="PyTorch is not installed (apt-get install python3-torch)")


def test_the_training_example_learns_its_function():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, os.path.join(REPO, "examples", "python", "train.py"),
                          "--epochs", "3", "--raftmaster", binary()],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "epoch 2: 2000 samples" in out.stdout
    assert out.stdout.rstrip().endswith("done")


def test_the_training_example_says_how_to_get_torch(tmp_path):
    # A torch that cannot be imported, ahead of any installed one.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), os.path.join(REPO, "python"), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, os.path.join(REPO, "examples", "python", "train.py"),
                          "--raftmaster", binary()], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "apt install python3-torch" in out.stderr and "pip install torch" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr, out.stderr


def _readme_training_loop():
    """The PyTorch training loop of the docs (README.md or docs/*.md)."""
    docs = [os.path.join(REPO, "README.md")]
    docs += sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    for path in docs:
        with open(path) as f:
            text = f.read()
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            if "RecordDataset(" in block and "for epoch in" in block:
                return block
    pytest.fail("no PyTorch training loop in the docs")


def test_the_docs_training_loop_runs_twice(cluster, job, tmp_path):
    """Run the docs' training loop twice on one job: the second run, whose
    passes are over, ends cleanly and says why it read nothing."""
    from raftmaster import recordio
    data = tmp_path / "train-000.recordio"
    with open(data, "wb") as f, recordio.Writer(f, max_chunk_size=256) as w:
        for i in range(200):
            w.write(struct.pack("<3f", i / 200, -i / 200, i / 100))
    code = _readme_training_loop()
    code = re.sub(r'addrs = \[.*?\]', "addrs = %r" % (cluster.addrs,), code, count=1)
    code = code.replace('"/data/train-*.recordio"', repr(str(data)))
    code = re.sub(r'job="[^"]*"', 'job=%r' % job, code)
    script = tmp_path / "loop.py"
    script.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    for run in (1, 2):
        out = subprocess.run([sys.executable, str(script)], env=env, cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, "run %d:\n%s%s" % (run, out.stdout, out.stderr)
    assert "set_epoch" not in out.stderr, out.stderr
    assert "raftmaster job delete " + job in out.stderr, out.stderr
