"""Waiting for requests to end, as ``spoolfetch wait`` does (``RequestWaiter`` in the daemon's
sources): on the spool's own records, followed with inotify (or polling, see ``_watch``), so it
works whether a daemon runs now, later, or is a drain started by cron.

Why no ending is missed: the watch is set up first, then the names are resolved and the disk
looked at, so whatever ends after the look is announced. No single sign is trusted: group markers
and rejections are read unordered, and a request file arriving in ``done/`` or ``failed/`` -- the
second trace every ending leaves -- makes the wait look at that request's folders again.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Generator, List, Optional, Sequence, Tuple

#: (request, outcome, path): how a request ended, and the record that says so.
Ending = Tuple[str, str, str]

from . import _names
from .errors import ItemFailure, RequestFailed, RequestRejected, UnknownRequest, WaitTimeout
from .events import GROUPS, REJECTIONS, Event, EventReader


@dataclass(frozen=True)
class ItemResult:
    """One item's end: ``outcome`` (``published``, ``unchanged``, ``uploaded``, ``failed``), its
    published ``file`` (absolute path), its ``marker_path`` and ``marker`` (the parsed
    ``NAME.done``; ``None`` under ``markers: group``), or the failure's ``code`` and ``message``."""

    index: int
    url: str
    outcome: str
    file: Optional[str] = None
    marker_path: Optional[str] = None
    marker: Optional[Dict[str, Any]] = None
    code: Optional[str] = None
    message: Optional[str] = None


@dataclass(frozen=True)
class Result:
    """A request's end: ``outcome`` (``published``, ``failed`` or ``rejected``), ``path`` (the
    group marker; for a rejection its error file; the request file in ``done/`` when a consumer
    removed the group marker), the parsed group ``marker``, and each item's :class:`ItemResult`."""

    request: str
    outcome: str
    path: str
    marker: Optional[Dict[str, Any]] = None
    items: List[ItemResult] = field(default_factory=list)
    error: Optional[Dict[str, Any]] = None  #: the parsed ``.error`` file (failed or rejected)
    error_path: Optional[str] = None  #: where ``error`` was read

    @property
    def files(self) -> List[str]:
        """The published (or confirmed unchanged) files, in item order."""
        return [i.file for i in self.items if i.file is not None]


def _load(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read())
        return value if isinstance(value, dict) else None
    except (OSError, ValueError):
        return None


def _ended_in_folders(name: str, spool: str) -> Optional[Ending]:
    for folder, outcome in (("rejected", "rejected"), ("failed", "failed")):
        path = os.path.join(spool, folder, name + ".error")
        if os.path.lexists(path):
            return (name, outcome, path)
    path = os.path.join(spool, "done", name)
    if os.path.lexists(path):
        return (name, "published", path)
    return None


class Waiter:
    """Waits for ``names`` (requests as ``add`` returned them) on one spool."""

    def __init__(self, spool: str, final_folder: str, names: Sequence[str],
                 poll_interval: Optional[float] = None) -> None:
        self.spool = spool
        self.final_folder = final_folder
        self.names = list(names)
        self.poll_interval = poll_interval

    def _reader(self) -> EventReader:
        return EventReader(self.spool, self.final_folder, kinds=GROUPS | REJECTIONS, follow=True, settle=0,
                           ordered=False, wake_folders=[os.path.join(self.spool, "done"), os.path.join(self.spool, "failed")],
                           poll_interval=self.poll_interval)

    def wait(self, timeout: Optional[float] = None) -> Dict[str, Result]:
        """Every request's :class:`Result` once all ended; :class:`WaitTimeout` first otherwise."""
        deadline = None if timeout is None else time.time() + timeout
        with self._reader() as reader:
            steps = self._steps(reader, deadline, timeout)
            try:
                until = next(steps)
                while True:
                    until = steps.send(reader.next(until))
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]

    async def wait_async(self, timeout: Optional[float] = None) -> Dict[str, Result]:
        """:meth:`wait` for an event loop: no thread is held while it waits."""
        deadline = None if timeout is None else time.time() + timeout
        with self._reader() as reader:
            steps = self._steps(reader, deadline, timeout)
            try:
                until = next(steps)
                while True:
                    until = steps.send(await reader.next_async(until))
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]

    def _steps(self, reader: EventReader, deadline: Optional[float], timeout: Optional[float]
               ) -> Generator[Optional[float], Optional[List[Event]], Dict[str, Result]]:
        """The wait without its I/O: yields until when to read, receives what the reader gave."""
        spool, final = self.spool, self.final_folder
        targets = {g: _names.newest(g, spool, final) for g in self.names}
        seen: Dict[str, Ending] = {}
        ended: Dict[str, Ending] = {}

        def end(given: str, ending: Ending) -> None:
            if targets.pop(given, None) is not None:
                ended[given] = ending

        def settle() -> None:
            for given, target in list(targets.items()):
                if target.name is None and target.queued_inode is not None:
                    target.name = _names.claimed(given, target.queued_inode, spool)
                if target.name is not None and target.name in seen:
                    end(given, seen[target.name])

        def take(events: List[Event]) -> None:
            by_name: Dict[str, List[str]] = {}
            pending = []
            for given, target in targets.items():
                if target.name is not None:
                    by_name.setdefault(target.name, []).append(given)
                else:
                    pending.append(given)
            for e in events:
                ending = (e.request, "rejected" if e.event == "rejected" else e.outcome, e.record)
                for given in by_name.get(e.request, []):
                    end(given, ending)
                if any(_names.follows_request(p, e.request) for p in pending):
                    seen[e.request] = ending
            settle()

        def look() -> Generator[Optional[float], Optional[List[Event]], None]:
            settle()
            filed = [(g, t.name) for g, t in targets.items() if t.name and _ended_in_folders(t.name, spool)]
            if not filed:
                return
            # The group marker is renamed in before the request file is filed: take the queued
            # records first, so such an ending is reported as its marker.
            while True:
                events = yield time.time()
                if not events:
                    break
                take(events)
            for given, name in filed:
                ending = _ended_in_folders(name, spool) if given in targets else None
                if ending is not None:
                    end(given, ending)

        while not reader.caught_up:
            events = yield time.time()
            if not events:
                break
            take(events)
        reader.take_wakeups()
        yield from look()
        unknown = [g for g, t in targets.items() if t.name is None and t.queued_inode is None]
        if unknown:
            for given in unknown:
                if given in targets:
                    targets[given] = _names.newest(given, spool, final)
            yield from look()
            still = [g for g in unknown if g in targets and targets[g].name is None and targets[g].queued_inode is None]
            if still:
                raise UnknownRequest(sorted(still))
        while targets:
            events = yield deadline
            if events is None:
                raise WaitTimeout(sorted(targets), timeout)
            take(events)
            if not events or reader.caught_up:
                reader.take_wakeups()
                yield from look()
        results: Dict[str, Result] = {}
        for given, (request, outcome, path) in ended.items():
            if outcome in ("failed", "published"):
                # The request file (with its error file) is filed just after the group marker:
                # waited for within the deadline, so that once `wait` returns the request's
                # state says it has ended too, and a failure's details are there.
                filed = os.path.join(spool, "failed", request + ".error") if outcome == "failed" \
                    else os.path.join(spool, "done", request)
                while not os.path.lexists(filed):
                    if (yield deadline) is None:
                        break
                    reader.take_wakeups()
            results[given] = self._result(request, outcome, path)
        return results

    def _result(self, request: str, outcome: str, path: str) -> Result:
        spool, final = self.spool, self.final_folder
        marker = _load(path) if path.endswith(".group.done") else _load(os.path.join(final, request + ".group.done"))
        if marker is not None and marker.get("request") != request:
            marker = None
        error = error_path = None
        if outcome in ("failed", "rejected"):
            error_path = os.path.join(spool, outcome, request + ".error")
            error = _load(error_path)
        items: List[ItemResult] = []
        for item in (marker or {}).get("items", []):
            name = item.get("marker")
            marker_path = os.path.join(final, name) if name else None
            file = os.path.join(final, item["file"]) if item.get("file") and item["outcome"] != "failed" else None
            items.append(ItemResult(index=item["index"], url=item["url"], outcome=item["outcome"], file=file,
                                    marker_path=marker_path, marker=_load(marker_path) if marker_path else None,
                                    code=item.get("code"), message=item.get("message")))
        return Result(request=request, outcome=outcome, path=path, marker=marker, items=items, error=error,
                      error_path=error_path if error is not None else None)


def raise_for(result: Result) -> Result:
    """Returns a published result; raises :class:`RequestFailed` or :class:`RequestRejected`."""
    if result.outcome == "rejected":
        error = result.error or {}
        raise RequestRejected(result.request, error.get("code", "rejected"), error.get("message", ""),
                              error.get("line"), result.path)
    if result.outcome == "failed":
        if result.error and result.error.get("items"):
            failures = [ItemFailure.from_record(i) for i in result.error["items"]]
        else:
            failures = [ItemFailure(index=i.index, url=i.url, code=i.code or "", message=i.message or "")
                        for i in result.items if i.outcome == "failed"]
        error = result.error or {}
        # A large request's error file counts its failed items; they are listed a line each in
        # the file it names beside it (a name only: never a path out of the folder).
        items_file = None
        if isinstance(error.get("itemsFile"), str) and result.error_path:
            items_file = os.path.join(os.path.dirname(result.error_path), os.path.basename(error["itemsFile"]))
        endings = error.get("endings") if isinstance(error.get("endings"), list) else None
        raise RequestFailed(result.request, failures, error.get("code", "items-failed"), error.get("message", ""), result,
                            endings=endings, items_file=items_file)
    return result
