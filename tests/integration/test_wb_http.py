"""The process's one WB HTTP client: shared by every job run and thread of a process, its
connections kept alive across runs, and a forked child's never its parent's."""

from __future__ import annotations

import os
import threading

from gatehouse.wb import client as wb
from tests.support.wb_sandbox import running_sandbox


def test_every_run_of_a_process_shares_one_client_and_its_connection():
    with running_sandbox() as sandbox:
        accepted = []
        get_request = sandbox.server.get_request

        def counted():  # every TCP connection the sandbox accepts
            accepted.append(1)
            return get_request()

        sandbox.server.get_request = counted
        http = wb.WbHttp(timeout_ms=5_000)
        host = lambda service: f"{sandbox.url}/{wb.HOST_LABELS[service]}"  # noqa: E731
        try:
            # Two job runs of two accounts, one after the other, each with its own token and headers
            for seller, job in (("seller-a", "job-a"), ("seller-b", "job-b")):
                run = wb.WbClient(http, host, seller, deadline_ms=5_000, job_id=job, run=1)
                assert run.call(wb.SELLER_INFO)["sid"] == seller
            clients = []
            threads = [threading.Thread(target=lambda: clients.append(http.client())) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            http.close()
        connections = len(accepted)  # (before the log is read: that is the test's own connection)
        # Then the sandbox saw each run's own token and job, over one connection
        assert [(e["seller"], e["job"]) for e in sandbox.log()] == [
            ("seller-a", "job-a"),
            ("seller-b", "job-b"),
        ]
        assert connections == 1
        assert len({id(c) for c in clients}) == 1


def test_a_forked_child_makes_its_own_client():
    http = wb.WbHttp(timeout_ms=1_000)
    parent = http.client()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: say whether its client is its parent's, and leave at once
        os.write(write, b"shared" if http.client() is parent else b"own")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 16)
    os.waitpid(pid, 0)
    assert answer == b"own"
    assert http.client() is parent  # the parent keeps its own
    http.close()
