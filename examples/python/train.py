"""Train a toy PyTorch model from a RecordIO dataset served by raftmaster.

It packs a small dataset with raftmaster.recordio (points of the plane and
a noisy linear function of them), starts a local 3-node cluster with
`raftmaster local` (or uses the one given with --addrs), and fits a linear
model through raftmaster.torch.RecordDataset: a DataLoader whose workers
are trainers of their own, reading each record of every pass once.

    python3 examples/python/train.py                  # bin/raftmaster local, 3 nodes
    python3 examples/python/train.py --addrs 127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003

It exits non-zero when the model did not learn the function.
"""

import argparse
import os
import queue
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import uuid

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError as e:
    sys.exit("train.py needs PyTorch, which cannot be imported here (%s).\n"
             "  Debian, Ubuntu: apt install python3-torch (in a venv: python3 -m venv --system-site-packages)\n"
             "  elsewhere:      pip install torch" % e)

from raftmaster import recordio  # noqa: E402 - after the check for torch
from raftmaster.torch import RecordDataset  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RECORD = struct.Struct("<3f")  # x1, x2, y
WEIGHTS, BIAS = (3.0, -2.0), 0.5


def pack_dataset(directory, files=4, per_file=500, seed=1):
    """Write files of records (x1, x2, y = 3*x1 - 2*x2 + 0.5 + noise); return their glob."""
    rnd = random.Random(seed)
    for i in range(files):
        with open(os.path.join(directory, "train-%03d.recordio" % i), "wb") as f, \
                recordio.Writer(f, max_chunk_size=1024, compressor=recordio.GZIP) as w:
            for _ in range(per_file):
                x1, x2 = rnd.uniform(-1, 1), rnd.uniform(-1, 1)
                y = WEIGHTS[0] * x1 + WEIGHTS[1] * x2 + BIAS + rnd.gauss(0, 0.05)
                w.write(RECORD.pack(x1, x2, y))
    return os.path.join(directory, "train-*.recordio")


def decode(record):
    x1, x2, y = RECORD.unpack(record)
    return torch.tensor([x1, x2]), torch.tensor([y])


def free_port_runs(n):
    """Two runs of n consecutive free ports on 127.0.0.1 (Raft and API), for raftmaster local."""
    rnd = random.Random()
    for _ in range(100):
        base = rnd.randrange(20000, 60000)
        socks = []
        try:
            for p in range(base, base + 2 * n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base, base + n
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


class LocalCluster:
    """`raftmaster local --nodes 3` in the background, until stop()."""

    def __init__(self, binary, data_dir, nodes=3):
        raft, http = free_port_runs(nodes)
        self.proc = subprocess.Popen(
            [binary, "local", "--nodes", str(nodes), "--data-dir", data_dir,
             "--raft-port", str(raft), "--http-port", str(http)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines = queue.Queue()

        def read():
            for line in self.proc.stdout:
                lines.put(line)
        threading.Thread(target=read, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                self.stop()
                raise RuntimeError("the local cluster did not get ready")
            m = re.search(r"local cluster ready, API on (.*)$", line)
            if m:
                self.addrs = [a.strip() for a in m.group(1).split(",")]
                return

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # each node hands leadership over and exits
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def train(addrs, pattern, epochs, workers):
    ds = RecordDataset(addrs, job="toy-" + uuid.uuid4().hex[:8], paths=[pattern],
                       dataset_options={"chunks_per_task": 2}, transform=decode)
    loader = DataLoader(ds, batch_size=32, num_workers=workers)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.MSELoss()
    loss = None
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        total, n = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item() * len(x)
            n += len(x)
        print("epoch %d: %d samples, mean loss %.4f" % (epoch, n, total / max(n, 1)), flush=True)
    w = model.weight.detach().flatten().tolist()
    b = model.bias.item()
    print("learned y = %.2f*x1 + %.2f*x2 + %.2f (true: %.1f*x1 + %.1f*x2 + %.1f)"
          % (w[0], w[1], b, WEIGHTS[0], WEIGHTS[1], BIAS))
    return max(abs(w[0] - WEIGHTS[0]), abs(w[1] - WEIGHTS[1]), abs(b - BIAS))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addrs", help="API addresses of a running cluster, comma separated (default: start one)")
    ap.add_argument("--raftmaster", default=os.path.join(REPO, "bin", "raftmaster"), help="the raftmaster binary")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers, each a trainer")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        pattern = pack_dataset(tmp)
        cluster = None
        if args.addrs:
            addrs = args.addrs.split(",")
        else:
            cluster = LocalCluster(args.raftmaster, os.path.join(tmp, "cluster"))
            addrs = cluster.addrs
            print("local cluster on %s" % ", ".join(addrs), flush=True)
        try:
            err = train(addrs, pattern, args.epochs, args.workers)
        finally:
            if cluster is not None:
                cluster.stop()
    if err > 0.1:
        print("the model did not learn the function (error %.3f)" % err)
        return 1
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
