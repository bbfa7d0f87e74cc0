"""s3:// datasets read through raftmaster.objstore (boto3) from an in-memory
S3 server (internal/fakes3, run as a helper process), by a cluster of its
own whose nodes may read the bucket."""

import collections
import os
import signal
import subprocess

import pytest

import raftmaster
from raftmaster import objstore, recordio
from cluster import REPO, Cluster, wait_until

pytest.importorskip("boto3", reason="boto3 is not installed (apt-get install python3-boto3)")

ACCESS_KEY = "AKIAPYTHONTEST"
SECRET = "python-secret-never-shown"
RECORDS = 120


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The endpoint of an in-memory S3 with bucket "pydata", and the
    environment that reaches it (set for the module, then restored)."""
    d = tmp_path_factory.mktemp("fakes3")
    exe = str(d / "fakes3")
    subprocess.run(["go", "build", "-o", exe, "./internal/fakes3/cmd/fakes3"], cwd=REPO, check=True)
    proc = subprocess.Popen([exe, "-access-key", ACCESS_KEY, "-buckets", "pydata"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    url = proc.stdout.readline().decode().strip()
    assert url.startswith("http://127.0.0.1:"), url
    env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "RAFTMASTER_S3_ENDPOINT": url,
           "RAFTMASTER_S3_REGION": "us-east-1", "RAFTMASTER_S3_PATH_STYLE": "true", "RAFTMASTER_S3_IAM": "false",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": str(d / "none"),
           "AWS_CONFIG_FILE": str(d / "none")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    objstore.reset_clients()
    c = objstore._client("s3")
    for f in range(3):
        import io
        buf = io.BytesIO()
        w = recordio.Writer(buf, max_chunk_size=40, compressor=recordio.NO_COMPRESSION)
        for i in range(f * RECORDS // 3, (f + 1) * RECORDS // 3):
            w.write(str(i).encode())
        w.close()
        c.put_object(Bucket="pydata", Key="ds/train-%03d.recordio" % f, Body=buf.getvalue())
    yield url
    proc.stdin.close()
    proc.wait(10)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    objstore.reset_clients()


@pytest.fixture(scope="module")
def s3_cluster(s3, tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("s3cluster")), nodes=3, args=[
        "--dataset-buckets", "s3://pydata/ds,s3://nobucket", "--s3-endpoint", s3, "--s3-region", "us-east-1",
        "--s3-path-style", "true", "--chunks-per-task", "1", "--failover-grace", "2s"])
    c.start()
    yield c
    c.stop()


def test_s3_object_reads_ranges(s3):
    f = objstore.S3Object("s3://pydata/ds/train-000.recordio", readahead=7)
    whole = objstore._client("s3").get_object(Bucket="pydata", Key="ds/train-000.recordio")["Body"].read()
    assert f.size == len(whole)
    assert f.read(10) == whole[:10]
    f.seek(-5, os.SEEK_END)
    assert f.read(100) == whole[-5:]
    f.seek(3)
    assert f.read() == whole[3:]


def test_missing_object_and_bad_credentials_are_clear(s3):
    with pytest.raises(objstore.ObjectStoreError, match="does not exist"):
        objstore.S3Object("s3://pydata/ds/none.recordio")
    os.environ["AWS_ACCESS_KEY_ID"] = "AKIAWRONG"
    objstore.reset_clients()
    try:
        with pytest.raises(objstore.ObjectStoreError, match="access denied") as e:
            objstore.S3Object("s3://pydata/ds/train-000.recordio")
        assert SECRET not in str(e.value)
    finally:
        os.environ["AWS_ACCESS_KEY_ID"] = ACCESS_KEY
        objstore.reset_clients()


def test_a_missing_bucket_fails_set_dataset(s3_cluster, job):
    with raftmaster.Client(s3_cluster.addrs, job=job, retry=30) as c:
        with pytest.raises(raftmaster.RaftmasterError, match="s3://nobucket.*does not exist") as e:
            c.set_dataset(["s3://nobucket/x/*.recordio"])
        assert SECRET not in str(e.value)


def test_record_dataset_over_s3_through_a_leader_kill(s3_cluster, job):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from raftmaster.torch import RecordDataset
    ds = RecordDataset(s3_cluster.addrs, job=job, paths=["s3://pydata/ds/*.recordio"],
                       dataset_options={"chunks_per_task": 1}, transform=lambda r: int(r.decode()))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    want = collections.Counter(range(RECORDS))
    killed = None
    for epoch in range(2):
        ds.set_epoch(epoch)
        got = collections.Counter()
        for n, r in enumerate(loader):
            got[r] += 1
            if epoch == 0 and n == 20:
                leader = s3_cluster.leader()
                killed = next(nd for nd in s3_cluster.nodes if nd.api == leader)
                killed.proc.send_signal(signal.SIGKILL)
                killed.proc.wait(10)
        assert got == want, "epoch %d" % epoch
    assert killed is not None
    killed.start()
    wait_until(lambda: killed.alive() and s3_cluster.leader() is not None, "the killed node back")
