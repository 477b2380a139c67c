"""README "From Python": its block is ``examples/nightly.py`` verbatim, and the program runs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from readme_blocks import ROOT, python_block

EXAMPLE = ROOT / "clients" / "python" / "examples" / "nightly.py"


def test_readme_block_is_the_example_file() -> None:
    assert python_block("### From Python") == EXAMPLE.read_text()


def test_the_example_runs_against_the_daemon(spool_dir, daemon, server, tmp_path) -> None:
    users, orders = b"id,name\n1,ada\n", b"id,total\n7,42\n" * 100
    server.put("users.csv", users)
    server.put("orders.csv", orders)
    cursor = tmp_path / "cursor"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(EXAMPLE), spool_dir, server.base, str(cursor)],
                              capture_output=True, text=True, env=env, timeout=120)

    first = run()
    assert first.returncode == 0, first.stderr
    final = os.path.join(spool_dir, "final")
    lines = first.stdout.splitlines()
    assert lines[:2] == [f"{final}/users.csv {len(users)} {hashlib.sha256(users).hexdigest()}",
                         f"{final}/orders.csv {len(orders)} {hashlib.sha256(orders).hexdigest()}"]
    # In the spool's order (items end in either order; a group marker stamped in the same clock
    # tick as an item's marker may sort before it, as in `spoolfetch events`).
    assert sorted(lines[2:]) == ["group published nightly ", "item published nightly#0 " + f"{final}/users.csv",
                                 "item published nightly#1 " + f"{final}/orders.csv"]
    # The next run: the name is used again (nightly~1), and only its events are new.
    second = run()
    assert second.returncode == 0, second.stderr
    again = second.stdout.splitlines()
    assert sorted(again[2:]) == ["group published nightly~1 ", "item published nightly~1#0 " + f"{final}/users-1.csv",
                                 "item published nightly~1#1 " + f"{final}/orders-1.csv"]
    os.remove(os.path.join(server.root, "orders.csv"))
    third = run()
    assert third.returncode == 1
    assert third.stderr == f"#1 {server.base}/orders.csv: http-status (HTTP status 404)\n"
