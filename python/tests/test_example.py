"""examples/python/train.py trains its toy model on a local 3-node cluster."""

import os
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
