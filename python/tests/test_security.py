"""Bearer tokens, limits and HTTPS, on a single-node cluster that requires tokens."""

import shutil
import ssl
import subprocess
import uuid

import pytest

import raftmaster
from cluster import Cluster
from conftest import write_dataset

TRAINER = "trainer-" + uuid.uuid4().hex
OPERATOR = "operator-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    d = tmp_path_factory.mktemp("secured")
    tokens = d / "tokens"
    tokens.write_text("trainer %s\noperator %s\n" % (TRAINER, OPERATOR))
    tokens.chmod(0o600)  # serve refuses a token file others may read
    c = Cluster(str(d), nodes=1, args=["--auth-tokens", str(tokens), "--max-job-tasks", "3"])
    c.token = TRAINER
    c.start()
    yield c
    c.stop()


def test_tokens_and_roles(secured, job):
    with pytest.raises(raftmaster.Unauthorized) as e:
        raftmaster.Client(secured.addrs, job=job, retry=0).get_task(0)
    assert e.value.status == 401
    with pytest.raises(raftmaster.Unauthorized):
        raftmaster.Client(secured.addrs, job=job, token="not-a-known-token", retry=0).status()
    trainer = raftmaster.Client(secured.addrs, job=job, token=TRAINER, retry=10)
    with pytest.raises(raftmaster.NoDataset):
        trainer.get_task(0)
    assert trainer.status()["ready"]
    with pytest.raises(raftmaster.Forbidden) as e:
        trainer.create_job("t-" + uuid.uuid4().hex[:12])
    assert e.value.status == 403
    operator = raftmaster.Client(secured.addrs, token=OPERATOR, retry=10)
    name = "t-" + uuid.uuid4().hex[:12]
    assert operator.create_job(name)
    assert not operator.create_job(name)
    operator.delete_job(name)
    with pytest.raises(raftmaster.UnknownJob) as e:
        operator.delete_job(name)
    assert e.value.status == 404


def test_limit_exceeded_changes_nothing(secured, job, tmp_path):
    c = raftmaster.Client(secured.addrs, job=job, token=TRAINER, retry=10)
    paths, _ = write_dataset(tmp_path, files=1, records=12)  # 4 chunks of 3 records
    with pytest.raises(raftmaster.LimitExceeded) as e:
        c.set_dataset(paths, chunks_per_task=1)
    assert e.value.status == 409 and "task" in e.value.message
    with pytest.raises(raftmaster.NoDataset):
        c.get_task(0)
    assert c.set_dataset(paths, chunks_per_task=2).tasks == 2


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1, and a context that trusts it."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    key, cert = str(d / "key.pem"), str(d / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=cert)
    return server, client


def test_https_addresses(secured, proxies, tls, job, tmp_path):
    server_ctx, client_ctx = tls
    p = proxies(secured.addrs[0], ssl_context=server_ctx)
    c = raftmaster.Client(["https://" + p.addr], job=job, token=TRAINER, ssl_context=client_ctx, retry=10)
    paths, _ = write_dataset(tmp_path, files=1, records=6)
    c.set_dataset(paths, chunks_per_task=2)
    assert list(c.records(0)) == [b"file 0 record %04d" % i for i in range(6)]
    # The tasks went through the proxy: leased, and finished riding the
    # next lease's request.
    assert any(b'"finished"' in (r["sent"] or b"") for r in p.seen("/task/get")) or p.seen("/task/finished")
    # The system's trust does not know the certificate: the handshake fails.
    untrusting = raftmaster.Client(["https://" + p.addr], job=job, token=TRAINER, retry=0)
    with pytest.raises(raftmaster.TransportError) as e:
        untrusting.status()
    assert isinstance(e.value.__cause__, ssl.SSLError)
