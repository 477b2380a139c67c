"""A Python client for a spoolfetch spool (standard library only).

>>> spool = Spool("/var/spool/spoolfetch")
>>> request = spool.add(["https://example.org/a.csv", "https://example.org/b.csv"], group="nightly", deadline="6h")
>>> result = request.wait(timeout=3600)          # RequestFailed / RequestRejected / WaitTimeout otherwise
>>> result.files                                  # the published files, absolute paths

``add`` writes the request file exactly as ``spoolfetch add`` does; ``wait`` and ``events`` read the
spool's own records (markers, error files) with inotify, or by polling (``poll_interval``,
``SPOOLFETCH_POLL``) on filesystems where inotify sees nothing (NFS, some FUSE mounts).
"""

from __future__ import annotations

import os
import time
from typing import AsyncIterator, Iterator, Optional, Sequence, Union

from ._request import Item, Options, as_items, request_text, write_request
from ._wait import ItemResult, Result, Waiter, raise_for
from ._watch import DEFAULT_POLL_INTERVAL
from .errors import (InvalidRequest, ItemFailure, NotASpool, RequestFailed, RequestRejected, SpoolfetchError,
                     UnknownRequest, WaitTimeout)
from .events import Cursor, Event, EventReader
from .status import Status, read_status

__all__ = [
    "Spool", "Request", "Item", "Result", "ItemResult", "Event", "Cursor", "Status", "SpoolfetchError",
    "InvalidRequest", "NotASpool", "UnknownRequest", "RequestFailed", "RequestRejected", "ItemFailure",
    "WaitTimeout", "DEFAULT_POLL_INTERVAL",
]
__version__ = "0.1.0"


class Request:
    """A request on the spool, by its name (as ``spoolfetch add`` prints it). ``marker_path``: the
    group marker it will produce, known before the daemon has seen the file."""

    def __init__(self, spool: "Spool", name: str, marker_known: bool = True) -> None:
        self.spool = spool
        self.name = name
        #: ``None`` when the group marker's name is not known before the group ends (a request
        #: named by ``request_name``, or looked up by name: its claim may name it ``NAME~N``, and
        #: with another ``group`` markers take ``GROUP.group.done``, ``GROUP-1.group.done``, ...
        #: in the order groups end); the result's ``path`` names it then.
        self.marker_path: Optional[str] = (os.path.join(spool.final_folder, name + ".group.done")
                                           if marker_known else None)

    def __repr__(self) -> str:
        return f"Request({self.name!r})"

    def state(self) -> Optional[str]:
        """Where the newest request of this name is now, without waiting: ``queued``, ``active``
        (claimed; also in the moment between its group marker and its filing), ``published``,
        ``failed``, ``rejected`` (its file filed in ``done/``, ``failed/``, ``rejected/``), or
        ``None`` when it is nowhere on the spool. After :meth:`wait` returns it is one of the last three."""
        from . import _names
        from ._wait import _ended_in_folders
        target = _names.newest(self.name, self.spool.path, self.spool.final_folder)
        if target.name is None:
            return "queued" if target.queued_inode is not None else None
        ended = _ended_in_folders(target.name, self.spool.path)
        if ended is not None:
            return ended[1]
        return "active"

    def wait(self, timeout: Optional[float] = None) -> Result:
        """Blocks until the request's group has ended; returns its :class:`Result` when every item
        was published (or unchanged). Raises :class:`RequestFailed` (each item's code and message
        from ``failed/R.error``), :class:`RequestRejected` (the rule, message and line),
        :class:`WaitTimeout`, or :class:`UnknownRequest`."""
        return raise_for(self.ended(timeout))

    def ended(self, timeout: Optional[float] = None) -> Result:
        """Like :meth:`wait`, but a failed or rejected end is returned, not raised."""
        return self.spool._waiter([self.name]).wait(timeout)[self.name]

    async def wait_async(self, timeout: Optional[float] = None) -> Result:
        """:meth:`wait` for an event loop (no thread held while it waits)."""
        return raise_for(await self.ended_async(timeout))

    async def ended_async(self, timeout: Optional[float] = None) -> Result:
        """:meth:`ended` for an event loop."""
        return (await self.spool._waiter([self.name]).wait_async(timeout))[self.name]


class Spool:
    """A spool folder. ``final_folder``: the daemon's, when not ``SPOOL/final``. ``poll_interval``:
    seconds between looks where inotify cannot be used (see ``spoolfetch._watch``); ``None`` uses
    inotify unless ``SPOOLFETCH_POLL`` is set."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], final_folder: Optional[str] = None,
                 poll_interval: Optional[float] = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.final_folder = os.path.abspath(final_folder) if final_folder else os.path.join(self.path, "final")
        self.poll_interval = poll_interval
        if not os.path.isdir(os.path.join(self.path, "incoming")):
            raise NotASpool(f"{self.path} is not a spool (no incoming/ folder)")

    def __repr__(self) -> str:
        return f"Spool({self.path!r})"

    def add(self, urls: Union[str, Item, Sequence[Union[str, Item]]], *, group: Optional[str] = None,
            name: Optional[str] = None, sha256: Optional[str] = None, deadline: Optional[str] = None,
            priority: Optional[str] = None, headers: Sequence[str] = (), earliest_start: Optional[str] = None,
            expected_bytes: Optional[Union[int, str]] = None, max_bytes: Optional[Union[int, str]] = None,
            discretionary: bool = False, request_name: Optional[str] = None) -> Request:
        """Writes one request file, as ``spoolfetch add`` does, and returns its :class:`Request`.

        ``urls``: one URL, an :class:`Item`, or a list of them (one group). ``name``, ``sha256``,
        ``expected_bytes`` and ``max_bytes`` describe a single file (for several, give them per
        :class:`Item`). ``deadline``: an RFC 3339 time or a time from the claim (``90m``, ``6h``).
        With ``group``, the request is named after it (``G``, or ``G~N`` when ``G`` is taken).
        ``request_name``: name the request file so (a plain name), for a producer that must find
        its own request again (see :meth:`Request.state`); ``FileExistsError`` when one of that
        name is queued already. Refused arguments raise :class:`InvalidRequest` and nothing is written; a request the
        daemon rejects ends in ``rejected/`` and its ``wait`` raises :class:`RequestRejected`."""
        items = as_items(urls, name, sha256, expected_bytes, max_bytes)
        text = request_text(items, group, Options(earliest_start, deadline, priority, discretionary, list(headers)))
        if request_name is not None:
            from ._request import plain_name_violation
            why = plain_name_violation(request_name)
            if why or request_name.endswith(".tmp"):
                raise InvalidRequest("request_name", f"request_name {why or 'ends in .tmp'}")
        name = write_request(self.path, text, group, self.final_folder, request_name)
        return Request(self, name, marker_known=request_name is None)

    def request(self, name: str) -> Request:
        """The request named ``name`` (as ``add`` returned it), to wait for."""
        return Request(self, name, marker_known=False)

    def _waiter(self, names: Sequence[str]) -> Waiter:
        return Waiter(self.path, self.final_folder, names, self.poll_interval)

    def events(self, since: Optional[Union[str, Cursor]] = None, follow: bool = False,
               timeout: Optional[float] = None) -> Iterator[Event]:
        """The spool's endings in order, after the cursor ``since`` (an event's ``cursor``): the
        records of ``spoolfetch events --json``. With ``follow``, waits for more (until ``timeout``
        seconds pass, if given). Store each handled event's ``cursor``: resumed from it, nothing is
        lost or repeated."""
        cursor = Cursor.parse(since) if isinstance(since, str) and since else (since or None)
        until = None if timeout is None else time.time() + timeout
        with EventReader(self.path, self.final_folder, since=cursor, follow=follow,
                         poll_interval=self.poll_interval) as reader:
            while True:
                batch = reader.next(until)
                if batch is None:
                    return
                yield from batch

    async def events_async(self, since: Optional[Union[str, Cursor]] = None, follow: bool = False,
                           timeout: Optional[float] = None) -> AsyncIterator[Event]:
        """:meth:`events` for an event loop: ``async for event in spool.events_async(...)``."""
        cursor = Cursor.parse(since) if isinstance(since, str) and since else (since or None)
        until = None if timeout is None else time.time() + timeout
        with EventReader(self.path, self.final_folder, since=cursor, follow=follow,
                         poll_interval=self.poll_interval) as reader:
            while True:
                batch = await reader.next_async(until)
                if batch is None:
                    return
                for event in batch:
                    yield event

    def status(self) -> Status:
        """The live daemons' reports and the queued requests (``spoolfetch status --json``)."""
        return read_status(self.path)

    def add_async(self, *args, **kwargs) -> Request:  # type: ignore[no-untyped-def]
        """:meth:`add` (a few small writes and renames: it does not block an event loop for
        long); ``await spool.add_async(...).wait_async()``."""
        return self.add(*args, **kwargs)
