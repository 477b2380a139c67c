"""``Spool.status`` reads the daemons' status files as ``spoolfetch status --json`` does."""

from __future__ import annotations

import json
import os
import time

from conftest_client import cli
from spoolfetch import Spool


def without_age(document: dict) -> dict:
    for d in document["daemons"]:
        d.pop("reportAgeSeconds", None)
        d.pop("stale", None)
    return document


def test_status_matches_the_cli(spool_dir, daemon, server) -> None:
    spool = Spool(spool_dir)
    spool.add(server.put("s.txt", b"s"), group="st").wait(timeout=60)
    # The report is written at most once a second: wait (bounded) until it counts the end.
    deadline = time.monotonic() + 20
    while True:
        status = spool.status()
        if status.running and status.daemons[0]["published"] >= 1 and status.daemons[0]["running"] == 0:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    # The same report read twice (it is rewritten only while something changes): equal.
    for _ in range(10):
        mine = without_age(spool.status().to_dict())
        theirs = without_age(json.loads(cli("status", "--json", "--spool", spool_dir).stdout))
        if mine == theirs or mine["daemons"][0]["updatedAt"] == theirs["daemons"][0]["updatedAt"]:
            break
    assert mine == theirs
    assert mine["daemons"][0]["pid"] == daemon.process.pid
    assert any(t["request"] == "st" and t["state"] == "done" for t in mine["tasks"])


def test_status_without_a_daemon_lists_the_queue_like_the_cli(spool_dir) -> None:
    spool = Spool(spool_dir)
    request = spool.add("https://example.org/a")
    os.makedirs(os.path.join(spool_dir, "status"), exist_ok=True)
    # A report left by a daemon on this host that is gone is not listed.
    with open(os.path.join(spool_dir, "status", "gone.json"), "w") as f:
        json.dump({"daemon": {"host": os.uname().nodename, "pid": 2 ** 22 + 7, "version": "x", "spool": spool_dir,
                              "startedAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z", "running": 0,
                              "queued": 0, "published": 0, "failed": 0, "rejected": 0}, "tasks": [], "morePending": 0}, f)
    status = spool.status()
    result = cli("status", "--json", "--spool", spool_dir, check=False)
    assert result.returncode == 1 and not status.running
    assert status.to_dict() == json.loads(result.stdout)
    assert [t["id"] for t in status.tasks] == [request.name]
