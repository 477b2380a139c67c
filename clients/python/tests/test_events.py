"""``Spool.events`` yields what ``spoolfetch events --json`` prints, and a reader killed mid-stream
and resumed from its saved cursor loses and repeats nothing."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from conftest_client import cli
from spoolfetch import Cursor, RequestFailed, RequestRejected, Spool


def cli_events(spool_dir: str, since: str = "") -> list:
    args = ["events", "--json", "--spool", spool_dir] + (["--since", since] if since else [])
    return [json.loads(line) for line in cli(*args).stdout.splitlines()]


def end_some(spool: Spool, server) -> None:
    """Published, failed (404) and rejected endings, waited for."""
    spool.add([server.put("one.txt", b"1"), server.put("two.txt", b"2")], group="pair").wait(timeout=60)
    with pytest.raises(RequestFailed):
        spool.add([server.put("three.txt", b"3"), f"{server.base}/gone"], group="half").wait(timeout=60)
    with pytest.raises(RequestRejected):
        spool.add("https://example.org/x", priority="high", deadline="soonish").wait(timeout=60)


def test_same_records_as_the_cli_and_since(spool_dir, daemon, server) -> None:
    spool = Spool(spool_dir)
    end_some(spool, server)
    mine = [e.to_dict() for e in spool.events()]
    theirs = cli_events(spool_dir)
    assert mine == theirs
    assert {(e["event"], e["outcome"]) for e in mine} >= {("item", "published"), ("group", "published"),
                                                          ("item", "failed"), ("group", "failed"), ("rejected", "rejected")}
    failed = next(e for e in mine if e["event"] == "item" and e["outcome"] == "failed")
    assert failed["code"] == "http-status"
    for i in range(len(mine)):
        assert [e.to_dict() for e in spool.events(since=mine[i]["cursor"])] == cli_events(spool_dir, mine[i]["cursor"])
        assert [e.to_dict() for e in spool.events(since=Cursor.parse(mine[i]["cursor"]))] == mine[i + 1:]
    assert [e.json_line() for e in spool.events()] == cli(*["events", "--json", "--spool", spool_dir]).stdout.splitlines()


def test_malformed_cursor_is_refused(spool_dir) -> None:
    with pytest.raises(ValueError, match="malformed cursor"):
        list(Spool(spool_dir).events(since="12:nowhere:0:x"))


READER = """
import sys
from spoolfetch import Spool
spool = Spool(sys.argv[1], poll_interval=float(sys.argv[3]) if sys.argv[3] != "-" else None)
for event in spool.events(since=sys.argv[2] or None, follow=True):
    sys.stdout.write(event.json_line() + "\\n")
    sys.stdout.flush()
"""


@pytest.mark.parametrize("poll", ["-", "0.05"], ids=["inotify", "poll"])
def test_reader_killed_mid_stream_resumes_from_its_cursor(spool_dir, daemon, server, poll) -> None:
    spool = Spool(spool_dir)
    rounds = 12
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    lines: list = []

    def start(since: str) -> subprocess.Popen:
        # Unbuffered, so that select() on the pipe sees every line not yet read.
        return subprocess.Popen([sys.executable, "-c", READER, spool_dir, since, poll], stdout=subprocess.PIPE,
                                bufsize=0, env=env)

    reader = start("")
    kills = 0
    for n in range(rounds):
        request = spool.add([server.put(f"f{n}-{i}.txt", b"x" * (n + i)) for i in range(3)], group=f"g{n}")
        request.wait(timeout=60)
        if n % 4 == 1:
            # Kill it once it has printed this round's group, in the middle of the stream (more
            # endings keep coming), then resume from the last line it printed.
            while True:
                line = reader.stdout.readline()
                assert line, "the reader ended"
                lines.append(json.loads(line))
                if lines[-1]["event"] == "group" and lines[-1]["request"] == f"g{n}":
                    break
            reader.send_signal(signal.SIGKILL)
            reader.wait()
            kills += 1
            reader = start(lines[-1]["cursor"])
    # Every ending (the last group's items may sort after its group: same clock tick).
    deadline = time.monotonic() + 30
    while len(lines) < rounds * 4:
        ready, _, _ = select.select([reader.stdout], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"only {len(lines)} events within 30 s"
        line = reader.stdout.readline()
        assert line
        lines.append(json.loads(line))
    reader.kill()
    reader.wait()
    assert kills == 3
    full = cli_events(spool_dir)
    assert len(full) == rounds * 4
    assert lines == full


def test_events_async_follows(spool_dir, daemon, server) -> None:
    spool = Spool(spool_dir)

    async def scenario() -> list:
        seen = []
        follower = spool.events_async(follow=True, timeout=60)
        spool.add(server.put("a1.txt", b"a"), group="async-one")
        async for event in follower:
            seen.append(event)
            if event.event == "group":
                break
        await follower.aclose()
        return seen

    seen = asyncio.run(scenario())
    assert [(e.event, e.outcome) for e in seen] == [("item", "published"), ("group", "published")]
    assert [e.to_dict() for e in seen] == cli_events(spool_dir)


def test_a_groups_ending_sorts_after_its_items_within_one_clock_tick() -> None:
    """The daemon's rule (``RecordKey``): in one ctime tick, item markers before group markers,
    whatever the names -- ``a.group.done`` sorts by name before ``u.csv.done``."""
    item = Cursor(5, 0, "u.csv.done", 0)
    group = Cursor(5, 0, "a.group.done", 0)
    assert item < group and group > item and item <= group
    assert Cursor(4, 0, "a.group.done", 0) < item, "an earlier tick still comes first"
    assert Cursor.parse(str(group)) == group


def test_a_deadline_over_a_down_host_carries_its_cause(spool_dir, daemon, server) -> None:
    """A host on 127.0.0.1 whose port is bound but never listens refuses every connection: the
    item's ``deadline`` ending carries the cause (host, curl code 7), read alike by the client
    and ``events --json``."""
    import socket
    down = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        down.bind(("127.0.0.1", 0))
        port = down.getsockname()[1]
        spool = Spool(spool_dir)
        with pytest.raises(RequestFailed):
            spool.add(f"http://127.0.0.1:{port}/x", deadline="2s").wait(timeout=60)
    finally:
        down.close()
    mine = [e for e in spool.events() if e.event == "item"]
    assert len(mine) == 1 and mine[0].code == "deadline"
    cause = mine[0].cause
    assert cause is not None
    assert cause["code"] == "host-unreachable"
    assert cause["host"] == f"127.0.0.1:{port}"
    assert cause["curlCode"] == 7
    assert cause["attempts"] == 0
    assert [e.to_dict() for e in spool.events()] == cli_events(spool_dir)
