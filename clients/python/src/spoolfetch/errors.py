"""The client's exceptions. Those about a request's end carry what its ``.error`` file says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence


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

    @classmethod
    def from_record(cls, item: Dict[str, Any]) -> "ItemFailure":
        return cls(index=item["index"], url=item["url"], code=item.get("code", ""), message=item.get("message", ""),
                   name=item.get("name"), attempts=item.get("attempts"), http_status=item.get("httpStatus"),
                   curl_code=item.get("curlCode"), curl_error=item.get("curlError"))


class RequestFailed(SpoolfetchError):
    """The request's group ended with failed items. ``items``: each failure; ``code``/``message``:
    the error file's (``items-failed``); ``result``: the whole :class:`~spoolfetch.Result`."""

    def __init__(self, request: str, items: List[ItemFailure], code: str = "items-failed", message: str = "",
                 result: Any = None) -> None:
        shown = "; ".join(f"#{i.index} {i.code}: {i.message}" for i in items)
        super().__init__(f"request {request} failed: {shown or message}")
        self.request = request
        self.items = items
        self.code = code
        self.message = message
        self.result = result


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
