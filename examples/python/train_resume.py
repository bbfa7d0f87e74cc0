"""Train a toy PyTorch model that saves its data position with the model, and resumes there.

It fits a linear model to a RecordIO dataset served by a running raftmaster
cluster, through raftmaster.torch.RecordLoader, and every --every steps saves
the model, the optimizer and the loader's state (a cursor of the job: the
records trained so far) together in one file, atomically (a temporary file,
then os.replace). Started again with the same --checkpoint and --job, it
loads that file and resumes: the job's dispatch goes back to the cursor, so
the records trained after the last checkpoint, lost with the process, are
read again, and no record is trained twice in the model saved; at any
--workers.

    make run                                          # in another terminal
    python3 examples/python/train_resume.py --crash-after 40    # dies at step 40
    python3 examples/python/train_resume.py                     # resumes, finishes

The dataset is packed into --data when it has no RecordIO file yet; the
cluster's nodes must see the same path (make run's do). The token of a
cluster with tokens comes from RAFTMASTER_TOKEN, or the first line of the
file RAFTMASTER_TOKEN_FILE names. It exits non-zero when the model did not
learn the function.
"""

import argparse
import glob
import os
import random
import struct
import sys

try:
    import torch
except ImportError as e:
    sys.exit("train_resume.py needs PyTorch, which cannot be imported here (%s).\n"
             "  Debian, Ubuntu: apt install python3-torch (in a venv: python3 -m venv --system-site-packages)\n"
             "  elsewhere:      pip install torch" % e)

from raftmaster import recordio  # noqa: E402 - after the check for torch
from raftmaster.torch import RecordDataset, RecordLoader  # noqa: E402

RECORD = struct.Struct("<3f")  # x1, x2, y
WEIGHTS, BIAS = (3.0, -2.0), 0.5
# make run's cluster: bin/raftmaster local --nodes 3.
LOCAL = "127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003"


def pack_dataset(directory, files=4, per_file=500, seed=1):
    """Write files of records (x1, x2, y = 3*x1 - 2*x2 + 0.5 + noise) unless
    directory has some; return their glob, absolute, for the cluster."""
    directory = os.path.abspath(directory)
    pattern = os.path.join(directory, "resume-*.recordio")
    if glob.glob(pattern):
        return pattern
    os.makedirs(directory, exist_ok=True)
    rnd = random.Random(seed)
    for i in range(files):
        path = os.path.join(directory, "resume-%03d.recordio" % i)
        with open(path + ".tmp", "wb") as f, recordio.Writer(f, max_chunk_size=1024, compressor=recordio.GZIP) as w:
            for _ in range(per_file):
                x1, x2 = rnd.uniform(-1, 1), rnd.uniform(-1, 1)
                y = WEIGHTS[0] * x1 + WEIGHTS[1] * x2 + BIAS + rnd.gauss(0, 0.05)
                w.write(RECORD.pack(x1, x2, y))
        os.replace(path + ".tmp", path)
    return pattern


def decode(record):
    x1, x2, y = RECORD.unpack(record)
    return torch.tensor([x1, x2]), torch.tensor([y])


def token():
    """The cluster's token: RAFTMASTER_TOKEN, else the first line of RAFTMASTER_TOKEN_FILE; None without."""
    if os.environ.get("RAFTMASTER_TOKEN"):
        return os.environ["RAFTMASTER_TOKEN"]
    path = os.environ.get("RAFTMASTER_TOKEN_FILE")
    if path:
        with open(path) as f:
            return f.readline().strip() or None
    return None


def save(path, obj):
    """torch.save obj to path atomically: a crash leaves the previous file whole."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--addrs", default=LOCAL,
                    help="API addresses of the cluster, comma separated (default: %(default)s, make run's)")
    ap.add_argument("--job", default="resume-demo", help="the job: one per training run (default: %(default)s)")
    ap.add_argument("--data", default="data/resume", help="directory of the dataset (default: %(default)s)")
    ap.add_argument("--checkpoint", default="resume-checkpoint.pt", help="the checkpoint file (default: %(default)s)")
    ap.add_argument("--every", type=int, default=10, help="save a checkpoint every this many steps (default: 10)")
    ap.add_argument("--epochs", type=int, default=3, help="passes over the dataset (default: 3)")
    ap.add_argument("--batch-size", type=int, default=32, help="samples per step (default: 32)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers, each a trainer (default: 2)")
    ap.add_argument("--crash-after", type=int, default=0, metavar="N",
                    help="die (os._exit, no cleanup) after N steps of this run, to try a resume")
    args = ap.parse_args()

    pattern = pack_dataset(args.data)
    ds = RecordDataset(args.addrs.split(","), job=args.job, token=token(), paths=[pattern],
                       dataset_options={"chunks_per_task": 2}, transform=decode)
    loader = RecordLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.MSELoss()

    # The samples trained into the model, per pass: saved with it, so that
    # the end shows each pass's records trained once, crashes or not.
    trained = {}
    if os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        trained = ck["trained"]
        # Before iterating: the job's dispatch goes back to the cursor.
        loader.load_state_dict(ck["data"])
        print("resumed at step %d, pass %d, from %s" % (loader.step, loader.pass_id, args.checkpoint), flush=True)

    steps = 0
    for epoch in range(loader.pass_id, args.epochs):
        loader.set_epoch(epoch)
        total, n = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item() * len(x)
            n += len(x)
            trained[epoch] = trained.get(epoch, 0) + len(x)
            steps += 1
            if loader.step % args.every == 0:
                # The model and the data position of the same step, in one file.
                save(args.checkpoint, {"model": model.state_dict(), "optim": opt.state_dict(),
                                       "trained": trained, "data": loader.state_dict()})
            if steps == args.crash_after:
                print("crashing at step %d" % loader.step, flush=True)
                os._exit(3)
        print("epoch %d: %d samples in this run, mean loss %.4f" % (epoch, n, total / max(n, 1)), flush=True)
    save(args.checkpoint, {"model": model.state_dict(), "optim": opt.state_dict(), "trained": trained,
                           "data": loader.state_dict()})
    loader.close()

    for epoch in sorted(trained):
        print("pass %d: %d records trained into the model" % (epoch, trained[epoch]))

    w = model.weight.detach().flatten().tolist()
    b = model.bias.item()
    print("learned y = %.2f*x1 + %.2f*x2 + %.2f (true: %.1f*x1 + %.1f*x2 + %.1f)"
          % (w[0], w[1], b, WEIGHTS[0], WEIGHTS[1], BIAS))
    if max(abs(w[0] - WEIGHTS[0]), abs(w[1] - WEIGHTS[1]), abs(b - BIAS)) > 0.1:
        print("the model did not learn the function")
        return 1
    print("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
