"""``SpoolfetchOperator``: files downloads into a spoolfetch spool and defers until they end."""

from __future__ import annotations

import hashlib
import re
import time
from datetime import timedelta
from typing import Any, Dict, List, Optional, Sequence, Union

from airflow.exceptions import AirflowException
from airflow.models import BaseOperator

from spoolfetch import Item, Spool

from ..triggers.spoolfetch import SpoolfetchTrigger


class SpoolfetchRequestFailed(AirflowException):
    """The request's group ended with failed items (``failures``: each one's index, url, code,
    message, http_status) or the daemon rejected it (``rejection``)."""

    def __init__(self, message: str, failures: List[Dict[str, Any]], rejection: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.failures = failures
        self.rejection = rejection


def request_name_for(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The request file's name for one task of one DAG run: the same in every try, so a retried
    task finds its own request. Characters a file name should not carry become ``_``; a name
    that would be too long keeps a readable head and a hash of the whole."""
    key = f"{dag_id}--{task_id}--{run_id}" + (f"--{map_index}" if map_index >= 0 else "")
    # No dots: the daemon puts a reused name's ~N before its last dot, as before an extension.
    plain = re.sub(r"[^A-Za-z0-9_+=@,-]", "_", key)
    name = f"airflow-{plain}"
    if len(name) > 200:
        name = f"{name[:150]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return name


class SpoolfetchOperator(BaseOperator):
    """Downloads ``urls`` through the spoolfetch daemon on ``spool`` as one group, without holding
    a worker slot while they run.

    ``execute`` writes the request file (named after the DAG, task and run, see
    :func:`request_name_for`) and defers on :class:`SpoolfetchTrigger`; the task succeeds when the
    group is published and returns (XCom) ``{"request", "group_marker", "files", "markers",
    "worker_seconds", "deferred_seconds"}``; it fails with the items' codes otherwise (also
    pushed as XCom ``failures``). A retried task finds its own request: one still queued,
    running or published is adopted (nothing is fetched twice); one that failed or was rejected
    is filed again (the daemon names it ``NAME~N``), which is what a retry is for.

    ``urls``: URLs or :class:`spoolfetch.Item` objects; ``group``: the group's name (default:
    the request's); ``deadline``: by when every item must have ended (``6h`` from the claim, or
    an RFC 3339 time); ``wait_timeout``: how long the deferred task may wait (Airflow's defer
    timeout). ``final_folder``/``poll_interval`` as for :class:`spoolfetch.Spool`.
    """

    template_fields: Sequence[str] = ("urls", "group", "deadline", "spool")
    ui_color = "#d6ecf3"

    def __init__(self, *, urls: Union[str, Sequence[Union[str, Item]]], spool: str, group: Optional[str] = None,
                 deadline: Optional[str] = None, priority: Optional[str] = None, headers: Sequence[str] = (),
                 final_folder: Optional[str] = None, poll_interval: Optional[float] = None,
                 wait_timeout: Optional[timedelta] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = urls
        self.spool = spool
        self.group = group
        self.deadline = deadline
        self.priority = priority
        self.headers = list(headers)
        self.final_folder = final_folder
        self.poll_interval = poll_interval
        self.wait_timeout = wait_timeout

    def execute(self, context: Any) -> None:
        started = time.time()
        ti = context["ti"]
        spool = Spool(self.spool, final_folder=self.final_folder, poll_interval=self.poll_interval)
        name = request_name_for(ti.dag_id, ti.task_id, ti.run_id, getattr(ti, "map_index", -1))
        state = spool.request(name).state()
        if state in ("queued", "active", "published"):
            self.log.info("found this task's request %s (%s): not filing a second one", name, state)
        else:
            if state is not None:
                self.log.info("this task's last request %s ended %s: filing it again", name, state)
            spool.add(self.urls, group=self.group, deadline=self.deadline, priority=self.priority,
                      headers=self.headers, request_name=name)
            self.log.info("filed spoolfetch request %s on %s", name, self.spool)
        deferred_at = time.time()
        self.defer(trigger=SpoolfetchTrigger(self.spool, name, self.final_folder, self.poll_interval,
                                             execute_started=started, deferred_at=deferred_at),
                   method_name="execute_complete", timeout=self.wait_timeout)

    def execute_complete(self, context: Any, event: Dict[str, Any]) -> Dict[str, Any]:
        started, deferred_at, ended_at = event.get("execute_started"), event.get("deferred_at"), event.get("ended_at")
        timing = {}
        if started is not None and deferred_at is not None and ended_at is not None:
            timing = {"worker_seconds": round(deferred_at - started, 6), "deferred_seconds": round(ended_at - deferred_at, 6)}
            self.log.info("worker slot held %.3f s to file the request; deferred %.3f s while it ran",
                          timing["worker_seconds"], timing["deferred_seconds"])
        if event["outcome"] == "published":
            return {"request": event["request"], "group_marker": event["path"], "files": event["files"],
                    "markers": event["markers"], **timing}
        failures = event.get("failures") or []
        context["ti"].xcom_push(key="failures", value=failures)
        if event["outcome"] == "rejected":
            r = event.get("rejection") or {}
            raise SpoolfetchRequestFailed(f"spoolfetch rejected request {event['request']}: {r.get('code')}: "
                                          f"{r.get('message')} (line {r.get('line')})", failures, r)
        shown = "; ".join(f"#{f['index']} {f['url']}: {f['code']}: {f['message']}" for f in failures)
        raise SpoolfetchRequestFailed(f"spoolfetch request {event['request']} failed: {shown}", failures)
