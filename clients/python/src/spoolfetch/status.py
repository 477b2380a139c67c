"""What the daemons on a spool are doing, read as ``spoolfetch status --json`` reads it.

Each daemon writes its live report to ``status/HOST-PID.json`` (a spool file format the README
documents, like the markers): reading those files directly needs no ``spoolfetch`` binary on the
client's machine and no process per call. As the command does, a report of a daemon on this host
that is gone is skipped, each report gets its age (``reportAgeSeconds``) and ``stale`` (it says
transfers run but was not rewritten for 10 s), and requests still queued in ``incoming/`` are
listed as ``queued`` tasks.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List

STALE_AFTER = 10.0


@dataclass
class Status:
    """``daemons`` (each live daemon's facts), ``tasks`` (each task: ``id``, ``request``,
    ``group``, ``name``, ``url``, ``state``, ``bytes``, ... as in ``status --json``) and
    ``more_pending`` (waiting tasks the reports leave out)."""

    daemons: List[Dict[str, Any]] = field(default_factory=list)
    tasks: List[Dict[str, Any]] = field(default_factory=list)
    more_pending: int = 0

    @property
    def running(self) -> bool:
        """Whether a daemon runs on the spool."""
        return bool(self.daemons)

    def to_dict(self) -> Dict[str, Any]:
        """The shape of ``status --json``: ``{"daemons", "tasks", "morePending"}``."""
        return {"daemons": self.daemons, "tasks": self.tasks, "morePending": self.more_pending}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as e:
        return e.errno == errno.ESRCH
    return False


def _age(daemon: Dict[str, Any], now: float) -> Dict[str, Any]:
    d = dict(daemon)
    try:
        written = datetime.fromisoformat(d["updatedAt"].replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError, AttributeError):
        return d
    age = max(0.0, now - written)
    d["reportAgeSeconds"] = int(age)
    d["stale"] = d.get("running", 0) > 0 and age > STALE_AFTER
    return d


def read_status(spool: str) -> Status:
    """The spool's status (see the module's doc)."""
    incoming = os.path.join(spool, "incoming")
    if not os.path.isdir(incoming):
        raise FileNotFoundError(f"{spool} is not a spool (no incoming/ folder)")
    status = Status()
    folder = os.path.join(spool, "status")
    host = socket.gethostname()
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            with open(os.path.join(folder, name), "rb") as f:
                report = json.loads(f.read())
            daemon = report["daemon"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if daemon.get("host") == host and _gone(int(daemon.get("pid", 0))):
            continue
        status.daemons.append(_age(daemon, time.time()))
        status.tasks += report.get("tasks", [])
        status.more_pending += report.get("morePending", 0)
    for name in sorted(os.listdir(incoming)):
        if name.startswith(".") or name.endswith(".tmp"):
            continue
        status.tasks.append({"id": name, "request": name, "group": "", "name": "", "url": "", "state": "queued",
                             "bytes": 0, "attempts": 0})
    return status
