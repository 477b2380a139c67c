"""``SpoolfetchTrigger``: waits in the triggerer until a spool request's group has ended."""

from __future__ import annotations

import time
from typing import Any, AsyncIterator, Dict, Optional, Tuple

from airflow.triggers.base import BaseTrigger, TriggerEvent

from spoolfetch import Spool


class SpoolfetchTrigger(BaseTrigger):
    """Follows the spool's records (the Python client's ``Request.ended_async``: inotify, or
    polling every ``poll_interval`` seconds) until the request ``request`` has ended, then fires
    one event: ``{"request", "outcome", "path", "files", "markers", "failures", "rejection",
    ...}``. Nothing is kept in memory that a restarted triggerer would need: the spool is the
    state, so a trigger run again simply looks again."""

    def __init__(self, spool: str, request: str, final_folder: Optional[str] = None,
                 poll_interval: Optional[float] = None, execute_started: Optional[float] = None,
                 deferred_at: Optional[float] = None) -> None:
        super().__init__()
        self.spool = spool
        self.request = request
        self.final_folder = final_folder
        self.poll_interval = poll_interval
        self.execute_started = execute_started
        self.deferred_at = deferred_at

    def serialize(self) -> Tuple[str, Dict[str, Any]]:
        return ("airflow.providers.spoolfetch.triggers.spoolfetch.SpoolfetchTrigger",
                {"spool": self.spool, "request": self.request, "final_folder": self.final_folder,
                 "poll_interval": self.poll_interval, "execute_started": self.execute_started,
                 "deferred_at": self.deferred_at})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        spool = Spool(self.spool, final_folder=self.final_folder, poll_interval=self.poll_interval)
        self.log.info("waiting for spoolfetch request %s on %s", self.request, self.spool)
        result = await spool.request(self.request).ended_async()
        error = result.error or {}
        failures = [{"index": i.get("index"), "url": i.get("url"), "code": i.get("code"), "message": i.get("message"),
                     "http_status": i.get("httpStatus")} for i in error.get("items") or []]
        if result.outcome == "failed" and not failures:
            failures = [{"index": i.index, "url": i.url, "code": i.code, "message": i.message, "http_status": None}
                        for i in result.items if i.outcome == "failed"]
        yield TriggerEvent({
            "request": result.request, "outcome": result.outcome, "path": result.path, "files": result.files,
            "markers": [i.marker if i.marker is not None else {k: v for k, v in vars(i).items() if k != "marker"}
                        for i in result.items if i.outcome != "failed"],
            "failures": failures,
            "rejection": {"code": error.get("code"), "message": error.get("message"), "line": error.get("line")}
            if result.outcome == "rejected" else None,
            "execute_started": self.execute_started, "deferred_at": self.deferred_at, "ended_at": time.time(),
        })
