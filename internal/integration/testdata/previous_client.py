"""A trainer on the Python client of the previous release, run by the
integration tests against this release's servers: it sets a job's
dataset, reads every pass, compare-and-sets and reads a key of the job's
register, joins an allgather group and asks for the save-model lease.
Records are printed as "record PASS RECORD"; any failure raises.

Usage: previous_client.py ADDRS JOB GLOB PASSES
"""
import sys

import raftmaster


def main() -> None:
    addrs, job, glob, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with raftmaster.Client(addrs, job=job) as c:
        c.set_dataset([glob], chunks_per_task=1)
        for p in range(passes):
            with c.records(p) as records:
                for rec in records:
                    print("record", p, rec.decode(), flush=True)
        first = c.kv_cas("py-key", 0, b"one")
        assert first.swapped, first
        got = c.kv_get("py-key")
        assert got.found and got.value == b"one" and got.version == first.version, got
        second = c.kv_cas("py-key", first.version, b"two")
        assert second.swapped and second.version > first.version, second
        miss = c.kv_cas("py-key", first.version, b"three")
        assert not miss.swapped and miss.value == b"two" and miss.version == second.version, miss
        res = c.join("py-group", "6f1c1e2a-6f3c-4f8e-9d52-3c1e2b7d9a01", 1, {"rank": "only"})
        assert res.rank == 0 and res.data == [{"rank": "only"}], res
        c.request_save_model("py-trainer", 1)
        st = c.status()
        assert st.get("leader", {}).get("id"), st
        print("done", flush=True)


if __name__ == "__main__":
    main()
