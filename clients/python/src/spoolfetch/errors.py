"""The client's exceptions. Those about a request's end carry what its ``.error`` file says."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence


class SpoolfetchError(Exception):
    """Base of every exception this package raises on purpose."""


class InvalidRequest(SpoolfetchError, ValueError):
    """``add`` refused its arguments before writing anything (as ``spoolfetch add`` exits 2)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class NotASpool(SpoolfetchError, FileNotFoundError):
    """The folder has no ``incoming/``: not a spool (or not created yet)."""


class UnknownRequest(SpoolfetchError, LookupError):
    """A name waited for is nowhere on the spool: not queued, claimed or ended."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(f"unknown request {', '.join(names)}: not in incoming/, active/, done/, failed/ or rejected/")
        self.names = list(names)


@dataclass(frozen=True)
class ItemFailure:
    """One failed item, from ``failed/R.error`` (or its group marker's line while that is not
    written yet): the stable reason ``code`` (``http-status``, ``sha256-mismatch``, ``deadline``,
    ``connect``, ...) and the ``message``."""

    index: int
    url: str
    code: str
    message: str
    name: Optional[str] = None
    attempts: Optional[int] = None
    http_status: Optional[int] = None
    curl_code: Optional[int] = None
    curl_error: Optional[str] = None
    #: A ``deadline`` or ``cancelled`` ending's cause (``code``, ``host``, ``waitingFor``, ...).
    cause: Optional[Dict[str, Any]] = None

    @classmethod
    def from_record(cls, item: Dict[str, Any]) -> "ItemFailure":
        cause = item.get("cause")
        return cls(index=item["index"], url=item["url"], code=item.get("code", ""), message=item.get("message", ""),
                   name=item.get("name"), attempts=item.get("attempts"), http_status=item.get("httpStatus"),
                   curl_code=item.get("curlCode"), curl_error=item.get("curlError"),
                   cause=cause if isinstance(cause, dict) else None)


class RequestFailed(SpoolfetchError):
    """The request's group ended with failed items. ``items``: the failures the error file lists;
    ``code``/``message``: the error file's (``items-failed``); ``result``: the whole
    :class:`~spoolfetch.Result`. A request of more than 1,000 failed items lists none: ``endings``
    counts them (``[{"code": ..., "message": ..., "count": ...}]``), ``items_file`` is the
    line-per-item file beside the error file, and :meth:`each_item` reads it a line at a time."""

    def __init__(self, request: str, items: List[ItemFailure], code: str = "items-failed", message: str = "",
                 result: Any = None, endings: Optional[List[Dict[str, Any]]] = None,
                 items_file: Optional[str] = None) -> None:
        shown = "; ".join(f"#{i.index} {i.code}: {i.message}" for i in items[:20])
        if len(items) > 20:
            shown += f"; and {len(items) - 20} more"
        counted = "; ".join(f"{e.get('count')} {e.get('code')}: {e.get('message')}" for e in endings or [])
        super().__init__(f"request {request} failed: {shown or counted or message}")
        self.request = request
        self.items = items
        self.code = code
        self.message = message
        self.result = result
        self.endings = list(endings or [])
        self.items_file = items_file

    def each_item(self) -> Iterator[ItemFailure]:
        """Every failed item: from ``items_file`` a line at a time when the error file counts
        them, else ``items``. Never loads the whole list of a large request."""
        if self.items_file is None:
            yield from self.items
            return
        with open(self.items_file, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield ItemFailure.from_record(json.loads(line))


class RequestRejected(SpoolfetchError):
    """The daemon refused the request file: ``code`` is the rule (``unknown-key``, ``bad-url``,
    ...), ``line`` the line it broke (when one did)."""

    def __init__(self, request: str, code: str, message: str, line: Optional[int], path: str) -> None:
        where = f" (line {line})" if line else ""
        super().__init__(f"request {request} rejected: {code}: {message}{where}")
        self.request = request
        self.code = code
        self.message = message
        self.line = line
        self.path = path


class WaitTimeout(SpoolfetchError, TimeoutError):
    """The timeout passed before the request ended; ``open``: the requests still open."""

    def __init__(self, open_requests: Sequence[str], timeout: Optional[float]) -> None:
        super().__init__(f"timed out after {timeout} s; still open: {' '.join(open_requests)}")
        self.open = list(open_requests)
        self.timeout = timeout
