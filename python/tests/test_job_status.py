"""Client(job=...).status() describes that job, not the default one."""


def test_status_of_a_job_client_is_the_jobs(cluster, make_client, job, dataset):
    paths, _ = dataset
    c = make_client()
    res = c.set_dataset(paths, chunks_per_task=2)
    st = c.status()
    fsm = st["fsm"]
    assert fsm["has_dataset"] is True, fsm
    assert fsm["tasks"] == res.tasks and fsm["todo"] == res.tasks, (fsm, res)
    assert fsm["pass"] == 0, fsm
    # The node's own figures stay.
    assert st["leader"]["id"] and st["applied_index"] > 0, st
    # Another job, without a dataset, says so.
    other = make_client(job=job + "-empty")
    other.create_job(job + "-empty")
    assert other.status()["fsm"]["has_dataset"] is False
    assert other.status()["fsm"]["tasks"] == 0


def test_status_of_a_job_not_created_yet_is_empty(cluster, make_client, job, dataset):
    paths, _ = dataset
    make_client(job=None).set_dataset(paths)  # the default job holds a dataset
    st = make_client(job=job + "-later").status()
    assert st["fsm"]["has_dataset"] is False and st["fsm"]["tasks"] == 0, st["fsm"]
