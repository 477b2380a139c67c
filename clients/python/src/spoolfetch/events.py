"""The spool's endings in order, resumable from a cursor: what ``spoolfetch events --json`` prints.

Read from the spool's own records -- item markers ``NAME.done`` and group markers
``GROUP.group.done`` in the final folder, error files in ``rejected/`` -- so no daemon keeps state
for a consumer. Records are ordered by the ctime the kernel gives them as they are renamed in, then
by folder, then item markers before group markers (a group marker written in the same clock tick as
its last item's marker comes after it), then by name; a record is handed out once it is ``settle`` (0.1 s) old, so two records landing
within one clock tick never come out in the wrong order, and a reader resumed after a cursor gets
exactly the events after it (the same rules as the daemon's ``SpoolEventReader``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Generator, Iterable, List, Optional, Sequence, Set, Tuple
from urllib.parse import quote, unquote

from ._watch import LIST_AGAIN, Arrivals, FolderWatch

_FOLDERS = ("final", "rejected")

ITEMS, GROUPS, REJECTIONS = 1, 2, 4
ALL_KINDS = ITEMS | GROUPS | REJECTIONS


@dataclass(frozen=True)
class Event:
    """One ending, with the fields of ``spoolfetch events --json`` (``None``: absent there)."""

    event: str  #: ``item``, ``group`` or ``rejected``
    outcome: str  #: ``published``/``unchanged``/``uploaded``/``failed`` (item), ``published``/``failed`` (group), ``rejected``
    request: str
    record: str  #: the marker or error file read, an absolute path
    at: str
    cursor: str  #: resume after this event with ``events(since=cursor)``
    group: Optional[str] = None
    index: Optional[int] = None
    url: Optional[str] = None
    file: Optional[str] = None  #: the published file, an absolute path
    bytes: Optional[int] = None
    sha256: Optional[str] = None
    code: Optional[str] = None  #: failures and rejections: the reason code
    message: Optional[str] = None
    published: Optional[int] = None
    failed: Optional[int] = None
    owner: Optional[str] = None  #: the request's owner (its file's user at claim), when the record says
    #: an item ended by ``deadline`` or ``cancelled``: what it waited on or last failed with
    #: (``code``, ``message``, ``host``, ``httpStatus``, ``curlCode``, ``attempts``, ``waitingFor``)
    cause: Optional[Dict[str, Any]] = None

    @property
    def id(self) -> str:
        """``REQUEST#INDEX`` for an item, else the request's name (as ``status`` and ``cancel`` use)."""
        return self.request if self.index is None else f"{self.request}#{self.index}"

    def to_dict(self) -> Dict[str, Any]:
        """The event as ``events --json`` writes it: absent fields left out."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def json_line(self) -> str:
        """One JSON line, keys sorted, as ``events --json`` prints it."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _order(ns: int, folder: int, name: str) -> Tuple[int, int, int, str]:
    """A record's place in the order: ctime, folder, item markers before group markers, name --
    the same rule as the daemon's ``RecordKey``."""
    return (ns, folder, 1 if name.endswith(".group.done") else 0, name)


@dataclass(frozen=True)
class Cursor:
    """A place in the order: the record's ctime (ns), folder (0 final, 1 rejected), name, and the
    event's place among that record's events. Written ``NANOSECONDS:FOLDER:SUB:NAME``."""

    nanoseconds: int
    folder: int
    name: str
    sub: int

    @classmethod
    def parse(cls, text: str) -> "Cursor":
        """Reads a cursor as ``events`` printed it; ``ValueError`` when it is not one."""
        parts = text.split(":", 3)
        try:
            ns, folder, sub, name = int(parts[0]), _FOLDERS.index(parts[1]), int(parts[2]), unquote(parts[3], errors="strict")
        except (ValueError, IndexError, UnicodeDecodeError):
            raise ValueError(f"malformed cursor {text!r}: pass a cursor exactly as events printed it "
                             "(NANOSECONDS:FOLDER:SUB:NAME)") from None
        if ns < 0 or sub < 0 or not name or not parts[0].lstrip("-").isdigit():
            raise ValueError(f"malformed cursor {text!r}: pass a cursor exactly as events printed it")
        return cls(ns, folder, name, sub)

    def __str__(self) -> str:
        return f"{self.nanoseconds}:{_FOLDERS[self.folder]}:{self.sub}:{quote(self.name, safe='-_.~+@,=')}"

    @property
    def record(self) -> Tuple[int, int, str]:
        return (self.nanoseconds, self.folder, self.name)

    @property
    def place(self) -> Tuple[int, int, int, str, int]:
        """Where the event stands in the order (see ``_order``), then its place in its record."""
        return _order(self.nanoseconds, self.folder, self.name) + (self.sub,)

    def __lt__(self, other: "Cursor") -> bool:
        return self.place < other.place

    def __le__(self, other: "Cursor") -> bool:
        return self.place <= other.place

    def __gt__(self, other: "Cursor") -> bool:
        return self.place > other.place

    def __ge__(self, other: "Cursor") -> bool:
        return self.place >= other.place


def _rfc3339(ns: int) -> str:
    """UTC with milliseconds, rounded to the nearest as the daemon's formatter does."""
    seconds, ms = divmod((ns + 500_000) // 1_000_000, 1000)
    stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{ms:03d}Z"


class EventReader:
    """Reads endings after ``since``; with ``follow`` waits for more (see :class:`FolderWatch`
    for inotify and its polling fallback).

    ``ordered=False`` (for waiting): every record that lands is handed out, in no promised order,
    perhaps more than once; a waiter takes endings idempotently. ``wake_folders`` (with ``follow``):
    watched too; :meth:`next` then returns an empty list when only names arrived there, and
    :meth:`take_wakeups` says which (``None``: any may have).
    """

    def __init__(self, spool: str, final_folder: Optional[str] = None, kinds: int = ALL_KINDS,
                 since: Optional[Cursor] = None, follow: bool = False, settle: float = 0.1,
                 ordered: bool = True, wake_folders: Sequence[str] = (),
                 poll_interval: Optional[float] = None) -> None:
        if not os.path.isdir(os.path.join(spool, "incoming")):
            raise FileNotFoundError(f"{spool} is not a spool (no incoming/ folder)")
        self.spool = spool
        self.final_folder = final_folder or os.path.join(spool, "final")
        self.kinds = kinds
        self.follow = follow
        self.settle = settle
        self.ordered = ordered
        self.cursor = since
        self._folders = [self.final_folder, os.path.join(spool, "rejected")]
        self._wakes = follow and bool(wake_folders)
        self._wake_names: Set[str] = set()
        self._wake_all = False
        self._pending: Dict[Tuple[int, str], Tuple[int, int, str]] = {}
        self._ready: List[Tuple[int, int, str]] = []
        self._handed: Dict[Tuple[int, str], int] = {}
        self._watch = FolderWatch(self._folders + list(wake_folders), poll_interval) if follow else None
        self._list_all()

    @property
    def watch_mode(self) -> Optional[str]:
        """``"inotify"``, ``"poll"``, or ``None`` without ``follow``."""
        return self._watch.mode if self._watch else None

    def close(self) -> None:
        if self._watch:
            self._watch.close()

    def __enter__(self) -> "EventReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def caught_up(self) -> bool:
        """Whether nothing listed waits to be handed out."""
        return not self._pending and not self._ready

    def take_wakeups(self) -> Optional[Set[str]]:
        names, every = self._wake_names, self._wake_all
        self._wake_names, self._wake_all = set(), False
        return None if every else names

    def next(self, until: Optional[float] = None) -> Optional[List[Event]]:
        """The next events in order. Without ``follow``: ``None`` once everything there at the start
        was handed out. With it: ``None`` only when ``until`` (a ``time.time()``) passes first."""
        steps = self._steps(until)
        try:
            wait = next(steps)
            while True:
                if self._watch is None:
                    time.sleep(max(0.0, wait or 0.0))  # only records settling are waited for
                    wait = steps.send(LIST_AGAIN)
                else:
                    wait = steps.send(self._watch.next(wait))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def next_async(self, until: Optional[float] = None) -> Optional[List[Event]]:
        """:meth:`next` for an event loop (no thread held while it waits)."""
        import asyncio
        steps = self._steps(until)
        try:
            wait = next(steps)
            while True:
                if self._watch is None:
                    await asyncio.sleep(max(0.0, wait or 0.0))
                    wait = steps.send(LIST_AGAIN)
                else:
                    wait = steps.send(await self._watch.next_async(wait))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _steps(self, until: Optional[float]) -> Generator[Optional[float], Arrivals, Optional[List[Event]]]:
        """The reading logic without I/O waits: yields how long to block, receives what arrived."""
        ripe = int(self.settle * 1e9)
        while True:
            now = time.time_ns()
            if not self._ready:
                self._ready = sorted((k for k in self._pending.values() if k[0] <= now - ripe), key=lambda k: _order(*k))
                for key in self._ready:
                    del self._pending[(key[1], key[2])]
            if self._ready:
                batch, self._ready = self._ready[:512], self._ready[512:]
                events = [e for key in batch for e in self._read(key)]
                if events:
                    self.cursor = Cursor.parse(events[-1].cursor)
                    return events
                continue
            if self._wake_all or self._wake_names:
                return []
            if not self._pending and self._watch is None:
                return None
            wake = until
            if self._pending:
                settles = (min(k[0] for k in self._pending.values()) + ripe) / 1e9 + 0.001
                wake = settles if wake is None else min(wake, settles)
            timeout = None if wake is None else max(0.0, wake - time.time())
            arrived = yield timeout
            if arrived is LIST_AGAIN:
                self._wake_all = self._wakes
                self._list_all()
            elif arrived:
                for folder, name in arrived:  # type: ignore[union-attr]
                    if folder < 2 and self._is_record(folder, name):
                        self._consider(folder, name)
                    elif self._wakes and folder > 0 and not name.startswith("."):
                        self._wake_names.add(name)
            elif until is not None and time.time() >= until:
                return None

    def _list_all(self) -> None:
        for index, folder in enumerate(self._folders):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                self._consider(index, name)

    def _is_record(self, folder: int, name: str) -> bool:
        if name.startswith("."):
            return False
        if folder == 1:
            return bool(self.kinds & REJECTIONS) and name.endswith(".error")
        if name.endswith(".group.done"):
            return bool(self.kinds & (GROUPS | ITEMS))
        return bool(self.kinds & ITEMS) and name.endswith(".done")

    def _consider(self, folder: int, name: str) -> None:
        if not self._is_record(folder, name):
            return
        try:
            st = os.lstat(os.path.join(self._folders[folder], name))
        except OSError:
            return
        if not (st.st_mode & 0o170000) == 0o100000:
            return
        key = (st.st_ctime_ns, folder, name)
        if self.ordered:
            if self.cursor is not None and _order(*key) < _order(*self.cursor.record):
                return
        elif self._handed.get((folder, name)) == st.st_ctime_ns:
            return  # unordered and polled: handed out already, unchanged
        self._pending[(folder, name)] = key

    def _read(self, key: Tuple[int, int, str]) -> List[Event]:
        ns, folder, name = key
        path = os.path.join(self._folders[folder], name)
        if not self.ordered:
            self._handed[(folder, name)] = ns
        try:
            with open(path, "rb") as f:
                record = json.loads(f.read())
        except (OSError, ValueError):
            return []
        if not isinstance(record, dict):
            return []
        events: List[Event] = []

        def add(sub: int, **fields: Any) -> None:
            place = Cursor(ns, folder, name, sub)
            if self.ordered and self.cursor is not None and place <= self.cursor:
                return
            owner = record.get("owner")
            events.append(Event(record=path, cursor=str(place), owner=owner if isinstance(owner, str) else None, **fields))

        try:
            if folder == 1:
                add(0, event="rejected", outcome="rejected", request=record["request"], code=record["code"],
                    message=record["message"], at=_rfc3339(ns))
            elif name.endswith(".group.done"):
                sub = 0
                for item in record["items"]:
                    marker = item.get("marker")
                    if item["outcome"] != "published" or not (marker or "").endswith(".done"):
                        if self.kinds & ITEMS:
                            published = item["outcome"] != "failed" and item.get("file") is not None
                            add(sub, event="item", outcome=item["outcome"], request=record["request"],
                                group=record["group"], index=item["index"], url=item["url"],
                                file=os.path.join(self.final_folder, item["file"]) if published else None,
                                bytes=item.get("bytes"), sha256=item.get("sha256"), code=item.get("code"),
                                message=item.get("message"), at=record["finishedAt"],
                                cause=item.get("cause") if isinstance(item.get("cause"), dict) else None)
                        sub += 1
                if self.kinds & GROUPS:
                    add(sub, event="group", outcome="failed" if record["failed"] > 0 else "published",
                        request=record["request"], group=record["group"], published=record["published"],
                        failed=record["failed"], at=record["finishedAt"])
            else:
                add(0, event="item", outcome="published", request=record["request"], group=record["group"],
                    index=record["index"], url=record["url"], file=os.path.join(self.final_folder, record["name"]),
                    bytes=record["bytes"], sha256=record["sha256"], at=record["finishedAt"])
        except (KeyError, TypeError):
            return []  # a file named like a record that holds no such JSON
        return events


def read_events(spool: str, since: Optional[str] = None, follow: bool = False,
                final_folder: Optional[str] = None, poll_interval: Optional[float] = None,
                until: Optional[float] = None) -> Iterable[Event]:
    """Yields events after the cursor ``since`` (a string as an event's ``cursor``)."""
    cursor = Cursor.parse(since) if since else None
    with EventReader(spool, final_folder, since=cursor, follow=follow, poll_interval=poll_interval) as reader:
        while True:
            events = reader.next(until)
            if events is None:
                return
            yield from events
