"""``Request.wait`` against the real daemon: published, failed with the item's code, rejected,
timed out; with inotify and with the polling fallback; and the asyncio variant."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time

import pytest

from spoolfetch import (ItemFailure, RequestFailed, RequestRejected, Spool, UnknownRequest, WaitTimeout)
from spoolfetch._watch import FolderWatch
from conftest_client import cli


@pytest.mark.parametrize("poll", [None, 0.05], ids=["inotify", "poll"])
def test_published_group_gives_files_and_markers(spool_dir, daemon, server, poll, monkeypatch) -> None:
    if poll:
        monkeypatch.setenv("SPOOLFETCH_POLL", str(poll))
    a, b = os.urandom(70_000), b"b" * 10
    urls = [server.put("a.bin", a), server.put("b.csv", b)]
    request = Spool(spool_dir).add(urls, group="nightly", deadline="5m")
    result = request.wait(timeout=60)
    assert result.outcome == "published" and result.request == "nightly"
    assert result.path == request.marker_path and result.marker["published"] == 2
    assert [open(f, "rb").read() for f in result.files] == [a, b]
    for item, body in zip(result.items, (a, b)):
        assert item.outcome == "published"
        assert item.marker_path == item.file + ".done"
        assert item.marker["sha256"] == hashlib.sha256(body).hexdigest()
        assert item.marker == json.load(open(item.marker_path))
    with FolderWatch([spool_dir]) as watch:
        assert watch.mode == ("poll" if poll else "inotify")


@pytest.mark.parametrize("poll", [None, 0.05], ids=["inotify", "poll"])
def test_404_raises_request_failed_with_the_error_files_code(spool_dir, daemon, server, poll) -> None:
    ok = server.put("ok.txt", b"fine")
    request = Spool(spool_dir, poll_interval=poll).add([ok, f"{server.base}/missing.csv"], group="broken")
    with pytest.raises(RequestFailed) as failed:
        request.wait(timeout=60)
    error = json.load(open(os.path.join(spool_dir, "failed", "broken.error")))
    assert failed.value.code == error["code"] == "items-failed"
    assert failed.value.items == [ItemFailure.from_record(i) for i in error["items"]]
    [item] = failed.value.items
    assert (item.index, item.code, item.http_status) == (1, "http-status", 404)
    assert "404" in item.message
    result = failed.value.result
    assert result.outcome == "failed" and result.files == [os.path.join(spool_dir, "final", "ok.txt")]


def test_rejected_request_raises_with_rule_and_line(spool_dir, daemon) -> None:
    # A deadline the client passes as given; the daemon's parser judges it, as for `add`.
    request = Spool(spool_dir).add("https://example.org/x", deadline="tomorrow-ish")
    with pytest.raises(RequestRejected) as rejected:
        request.wait(timeout=60)
    error = json.load(open(os.path.join(spool_dir, "rejected", request.name + ".error")))
    assert (rejected.value.code, rejected.value.message, rejected.value.line) == (error["code"], error["message"], error["line"])
    assert rejected.value.line == 2


def test_times_out_without_a_daemon_and_knows_unknown_names(spool_dir) -> None:
    spool = Spool(spool_dir)
    request = spool.add("https://example.org/x")
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as timed_out:
        request.wait(timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 5
    assert timed_out.value.open == [request.name]
    with pytest.raises(UnknownRequest):
        spool.request("nothing-like-it").wait(timeout=1)


def test_wait_started_before_the_daemon_sees_the_claim_and_the_end(spool_dir, server) -> None:
    from conftest_client import Daemon
    spool = Spool(spool_dir)
    request = spool.add(server.put("late.txt", b"late"), group="late")

    async def scenario() -> None:
        waiting = asyncio.ensure_future(request.wait_async(timeout=60))
        await asyncio.sleep(0)  # the wait has set up its watch before the daemon starts
        daemon = Daemon(spool_dir, [])
        try:
            result = await waiting
        finally:
            daemon.stop()
        assert result.files == [os.path.join(spool_dir, "final", "late.txt")]

    asyncio.run(scenario())


def test_async_add_and_wait_and_failure(spool_dir, daemon, server) -> None:
    spool = Spool(spool_dir)

    async def scenario() -> None:
        good = spool.add_async(server.put("g.txt", b"good"), group="good")
        bad = spool.add_async(f"{server.base}/nope", group="bad")
        result = await good.wait_async(timeout=60)
        assert open(result.files[0], "rb").read() == b"good"
        with pytest.raises(RequestFailed) as failed:
            await bad.wait_async(timeout=60)
        assert failed.value.items[0].code == "http-status"

    asyncio.run(scenario())


def test_request_name_is_found_again_and_its_state_followed(spool_dir, server) -> None:
    from conftest_client import Daemon
    spool = Spool(spool_dir)
    url = server.put("r.txt", b"r")
    request = spool.add(url, group="grp", request_name="job-42")
    assert request.marker_path is None and spool.request("job-42").state() == "queued"
    with pytest.raises(FileExistsError):
        spool.add(url, request_name="job-42")
    daemon = Daemon(spool_dir, [])
    try:
        result = spool.request("job-42").wait(timeout=60)
        assert result.request == "job-42" and result.marker["group"] == "grp"
        assert result.path == os.path.join(spool_dir, "final", "grp.group.done")
        assert spool.request("job-42").state() == "published"
        # The name used again: the claim names it job-42~1, and the name follows it there.
        again = spool.add(f"{server.base}/absent", request_name="job-42")
        with pytest.raises(RequestFailed):
            again.wait(timeout=60)
        assert spool.request("job-42").state() == "failed"
        assert sorted(os.listdir(os.path.join(spool_dir, "done"))) == ["job-42"]
        assert "job-42~1" in os.listdir(os.path.join(spool_dir, "failed"))
    finally:
        daemon.stop()


def test_falls_back_to_polling_where_inotify_cannot_start(spool_dir, daemon, server, monkeypatch) -> None:
    """Where libc's inotify cannot be had (``inotify_init1`` failing, or no such symbol), the
    watch polls every DEFAULT_POLL_INTERVAL seconds by itself, and waiting still works."""
    import spoolfetch._watch as watch_module
    from spoolfetch import DEFAULT_POLL_INTERVAL
    monkeypatch.delenv("SPOOLFETCH_POLL", raising=False)
    monkeypatch.setattr(watch_module, "_libc", lambda: None)
    with FolderWatch([spool_dir]) as watch:
        assert (watch.mode, watch.poll_interval) == ("poll", DEFAULT_POLL_INTERVAL)
    result = Spool(spool_dir).add(server.put("fb.txt", b"fallback"), group="fb").wait(timeout=60)
    assert open(result.files[0], "rb").read() == b"fallback"


def test_a_large_cancelled_request_counts_its_failures_and_streams_them(spool_dir, daemon, server) -> None:
    # 1,001 items waiting for an earliest start an hour away: more than the error file lists.
    count = 1001
    urls = [f"{server.base}/later-{i}.bin" for i in range(count)]
    request = Spool(spool_dir).add(urls, group="big", earliest_start="2099-01-01T00:00:00Z")
    active = os.path.join(spool_dir, "active")
    os.makedirs(active, exist_ok=True)  # the daemon makes it too; watched before the claim can land
    deadline = time.monotonic() + 60
    with FolderWatch([active]) as watch:
        # The daemon claims it into active/: the cancel then goes to the daemon.
        while request.state() != "active":
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the daemon did not claim the request within 60 s"
            watch.next(remaining)
    cancel = cli("cancel", request.name, "--spool", spool_dir)
    assert f"{count} item(s)" in cancel.stdout + cancel.stderr
    with pytest.raises(RequestFailed) as failed:
        request.wait(timeout=60)
    error = failed.value.result.error
    assert error is not None and error.get("itemsFile") and not error.get("items")
    assert failed.value.items == []
    assert [(e["code"], e["count"]) for e in failed.value.endings] == [("cancelled", count)]
    assert failed.value.items_file == os.path.join(spool_dir, "failed", error["itemsFile"])
    each = list(failed.value.each_item())
    assert [i.index for i in each] == list(range(count))
    assert {i.code for i in each} == {"cancelled"} and each[7].url == urls[7]
    assert each[0].cause is not None and each[0].cause["code"] == "waiting-start"
    assert f"{count} cancelled" in str(failed.value)
