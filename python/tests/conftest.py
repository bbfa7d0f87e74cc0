import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from cluster import Cluster, Proxy, wait_until  # noqa: E402

import raftmaster  # noqa: E402
from raftmaster import recordio  # noqa: E402


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A 3-node cluster shared by the tests; each test uses a job of its own."""
    c = Cluster(str(tmp_path_factory.mktemp("cluster")), nodes=3)
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="session")
def store_cluster(cluster):
    """The shared cluster once it has raised its protocol level to the
    register's store calls, which it does once every node has registered
    its release."""
    with raftmaster.Client(cluster.addrs, retry=30) as c:
        wait_until(lambda: c.protocol() >= raftmaster.KV_STORE_PROTOCOL, "protocol level %d"
                   % raftmaster.KV_STORE_PROTOCOL)
    return cluster


@pytest.fixture(scope="session")
def session_cluster(cluster):
    """The shared cluster once it has raised its protocol level to
    sessions'."""
    with raftmaster.Client(cluster.addrs, retry=30, session_ttl=0) as c:
        wait_until(lambda: c.protocol() >= raftmaster.SESSION_PROTOCOL, "protocol level %d"
                   % raftmaster.SESSION_PROTOCOL)
    return cluster


@pytest.fixture
def job():
    """A job name of this test's own."""
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def client(cluster, job):
    c = raftmaster.Client(cluster.addrs, job=job, retry=30)
    yield c
    c.close()


@pytest.fixture
def make_client(cluster, job):
    """Make clients of the test's job (closed at the end of the test)."""
    made = []

    def make(addrs=None, **kw):
        kw.setdefault("job", job)
        kw.setdefault("retry", 30)
        c = raftmaster.Client(addrs if addrs is not None else cluster.addrs, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


@pytest.fixture
def proxies():
    """Make proxies (closed at the end of the test)."""
    made = []

    def make(upstream, **kw):
        p = Proxy(upstream, **kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


def write_dataset(directory, files=2, records=60, max_chunk_size=64, compressor=recordio.GZIP, prefix="train"):
    """Write RecordIO files of distinct records; return their paths and the records."""
    paths, recs = [], []
    for i in range(files):
        path = os.path.join(str(directory), "%s-%03d.recordio" % (prefix, i))
        with open(path, "wb") as f, recordio.Writer(f, max_chunk_size, compressor) as w:
            for j in range(records):
                rec = b"file %d record %04d" % (i, j)
                w.write(rec)
                recs.append(rec)
        paths.append(path)
    return paths, recs


@pytest.fixture
def dataset(tmp_path):
    """Two gzip files of 60 records each, in chunks of 3 records."""
    return write_dataset(tmp_path)


@pytest.fixture
def fake():
    """Makes FakeServers (test_transport) that answer as given; closed at the end."""
    from test_transport import FakeServer
    made = []

    def make(answers, sessions=None):
        s = FakeServer(answers, sessions)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


@pytest.fixture
def clients():
    """Makes raftmaster Clients; closed at the end."""
    made = []

    def make(*args, **kw):
        c = raftmaster.Client(*args, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()
