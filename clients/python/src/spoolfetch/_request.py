"""Request files, written as ``spoolfetch add`` writes them (``AddRequest.text`` and
``RequestWriter.add`` in the daemon's sources): the same text for the same arguments, written to
``tmp/`` (``.NAME.tmp``, fdatasync, renamed to ``NAME``), then renamed into ``incoming/`` without
replacing anything, and ``incoming/`` fsynced.

Naming: without a group, ``add-STAMP-PID-N`` (``STAMP`` the UTC second as ``20261122T091500Z``,
``N`` a per-process counter); with ``group=G``, the first of ``G``, ``G~1``, ... that no request
on the spool holds (queued, claimed, or ended), chosen under the spool's claim lock
(``active/.claims.lock``) -- the name the daemon's claim keeps, so the group marker's path is known
at once: ``FINAL/NAME.group.done``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import itertools
import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, List, Optional, Sequence, Tuple, Union

from ._names import candidates
from .errors import InvalidRequest

_counter = itertools.count(1)
_counter_lock = threading.Lock()
_RESERVED = (".done", ".error", ".part", ".tmp")
_PRIORITIES = ("high", "normal", "low")


@dataclass
class Item:
    """One URL with its own keys (any left ``None`` is not written)."""

    url: str
    name: Optional[str] = None
    sha256: Optional[str] = None
    expected_bytes: Optional[Union[int, str]] = None
    max_bytes: Optional[Union[int, str]] = None
    headers: Sequence[str] = field(default_factory=list)


@dataclass
class Options:
    """Keys for every item of the request (``spoolfetch add``'s options, and ``deadline``)."""

    earliest_start: Optional[str] = None
    deadline: Optional[str] = None
    priority: Optional[str] = None
    discretionary: bool = False
    headers: Sequence[str] = field(default_factory=list)


def plain_name_violation(name: str) -> Optional[str]:
    """The plain-file-name rule of ``name`` and ``group`` (``PlainName.violation``)."""
    if not name:
        return "is empty"
    if len(name.encode()) > 255:
        return "is longer than 255 bytes"
    if "/" in name:
        return f"is a path ({name!r}), not a plain file name"
    if name in (".", ".."):
        return "is '.' or '..'"
    if name.startswith("."):
        return "starts with '.'"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "contains a control character"
    for suffix in _RESERVED:
        if name.lower().endswith(suffix):
            return f"ends in {suffix!r}, which the spool reserves for its own files"
    return None


def _check(field_name: str, value: Optional[str]) -> None:
    if value is not None and ("\n" in value or "\r" in value):
        raise InvalidRequest(field_name, f"{field_name} must not contain a line break")


def _size(value: Optional[Union[int, str]]) -> Optional[str]:
    return None if value is None else str(value)


def request_text(items: Sequence[Item], group: Optional[str], options: Options) -> str:
    """The request file's text. One item: exactly ``spoolfetch add``'s (its keys after its
    ``url``, the option keys too). Several: ``group``, the option keys as defaults before the first
    ``url``, then each item's ``url`` and its own keys."""
    if not items:
        raise InvalidRequest("urls", "a request needs at least one URL")
    for item in items:
        for name, value in (("url", item.url), ("name", item.name), ("sha256", item.sha256),
                            ("expected_bytes", _size(item.expected_bytes)), ("max_bytes", _size(item.max_bytes))):
            _check(name, value)
        for header in item.headers:
            _check("headers", header)
        if not re.match(r"^https?://", item.url, re.IGNORECASE):
            raise InvalidRequest("url", f"url must be http or https, got {item.url!r}")
        if item.name is not None and plain_name_violation(item.name):
            raise InvalidRequest("name", f"name {plain_name_violation(item.name)}")
        if item.sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", item.sha256):
            raise InvalidRequest("sha256", "sha256 must be 64 hex digits")
    for name, value in (("group", group), ("earliest_start", options.earliest_start),
                        ("deadline", options.deadline), ("priority", options.priority)):
        _check(name, value)
    for header in options.headers:
        _check("headers", header)
    if group is not None and plain_name_violation(group):
        raise InvalidRequest("group", f"group {plain_name_violation(group)}")
    if options.priority is not None and options.priority not in _PRIORITIES:
        raise InvalidRequest("priority", f"priority must be high, normal or low, got {options.priority!r}")

    def option_lines() -> List[str]:
        lines = []
        if options.earliest_start is not None:
            lines.append(f"earliest-start: {options.earliest_start}")
        if options.deadline is not None:
            lines.append(f"deadline: {options.deadline}")
        return lines

    lines: List[str] = []
    if group is not None:
        lines.append(f"group: {group}")
    single = len(items) == 1
    if not single:
        lines += option_lines()
        if options.priority is not None:
            lines.append(f"priority: {options.priority}")
        if options.discretionary:
            lines.append("discretionary: yes")
        lines += [f"header: {h}" for h in options.headers]
    for item in items:
        lines.append(f"url: {item.url}")
        if item.name is not None:
            lines.append(f"name: {item.name}")
        if single:
            lines += option_lines()
        if item.expected_bytes is not None:
            lines.append(f"expected-bytes: {item.expected_bytes}")
        if item.max_bytes is not None:
            lines.append(f"max-bytes: {item.max_bytes}")
        if item.sha256 is not None:
            lines.append(f"sha256: {item.sha256}")
        if single:
            if options.priority is not None:
                lines.append(f"priority: {options.priority}")
            if options.discretionary:
                lines.append("discretionary: yes")
            lines += [f"header: {h}" for h in options.headers]
        lines += [f"header: {h}" for h in item.headers]
    return "\n".join(lines) + "\n"


def unique_name(now: Optional[float] = None) -> str:
    """``add-20261122T091500Z-<pid>-<n>``: sortable by time, unique per host."""
    second = datetime.fromtimestamp(int(now if now is not None else time.time()), tz=timezone.utc)
    with _counter_lock:
        n = next(_counter)
    return f"add-{second.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}-{n}"


def _libc_renameat2() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        return fn
    except (OSError, AttributeError):
        return None


_renameat2 = _libc_renameat2()
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def rename_no_replace(source: str, target: str) -> None:
    """``rename`` that refuses an existing target (``FileExistsError``): ``renameat2`` with
    ``RENAME_NOREPLACE``, or ``link`` then ``unlink`` where rename takes no flags (the daemon's
    ``Directory.rename(replace: false)``)."""
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), target)
    os.link(source, target)
    os.unlink(source)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_tmp(spool: str, name: str, data: bytes) -> str:
    tmp = os.path.join(spool, "tmp")
    temp = os.path.join(tmp, f".{name}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(temp, flags, 0o644)
    except FileExistsError:
        os.unlink(temp)
        fd = os.open(temp, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fdatasync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temp)
        raise
    os.close(fd)
    path = os.path.join(tmp, name)
    os.rename(temp, path)
    return path


class _ClaimLock:
    """``active/.claims.lock`` held exclusively for the moment a name is picked (polled: on a
    network filesystem a lock manager's wake-up is not trusted; after 2 s the pick goes on without
    it, as the daemon's claim does: the lock only makes a name race rarer)."""

    def __init__(self, spool: str) -> None:
        self.fd = -1
        try:
            self.fd = os.open(os.path.join(spool, "active", ".claims.lock"),
                              os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError:
            pass

    def __enter__(self) -> "_ClaimLock":
        if self.fd >= 0:
            give_up = time.monotonic() + 2.0
            while True:
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= give_up:
                        os.close(self.fd)
                        self.fd = -1
                        break
                    time.sleep(0.01)  # the lock is held for one rename at a time
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def write_request(spool: str, text: str, group: Optional[str], final_folder: str,
                  request_name: Optional[str] = None) -> str:
    """Writes ``text`` into ``incoming/`` (see the module's doc); returns the request's name.
    ``request_name``: this name in ``incoming/`` exactly (``FileExistsError`` when a request of
    that name is queued there already); the daemon's claim keeps it, or names it ``NAME~N`` when an
    ended request still holds the name (``Spool.request(NAME)`` follows it there)."""
    data = text.encode()
    incoming = os.path.join(spool, "incoming")
    if not os.path.isdir(incoming):
        raise FileNotFoundError(f"{spool} is not a spool (no incoming/ folder)")
    if request_name is not None:
        temp = _write_tmp(spool, unique_name(), data)
        try:
            rename_no_replace(temp, os.path.join(incoming, request_name))
        except BaseException:
            os.unlink(temp)
            raise
        _fsync_dir(incoming)
        return request_name
    if group is not None:
        temp_name = unique_name()
        temp = _write_tmp(spool, temp_name, data)
        try:
            with _ClaimLock(spool):
                workers = _worker_folders(spool)
                for name in candidates(group):
                    taken = (any(os.path.lexists(os.path.join(spool, "active", w, name)) for w in [""] + workers)
                             or any(os.path.lexists(os.path.join(spool, f, name)) for f in ("done", "failed", "rejected"))
                             or os.path.lexists(os.path.join(final_folder, name + ".group.done")))
                    if taken:
                        continue
                    try:
                        rename_no_replace(temp, os.path.join(incoming, name))
                    except FileExistsError:
                        continue  # queued already
                    _fsync_dir(incoming)
                    return name
        except BaseException:
            if os.path.lexists(temp):
                os.unlink(temp)
            raise
        os.unlink(temp)
        raise FileExistsError(errno.EEXIST, "every name from the group's to its ~999 is taken", group)
    for _ in range(100):
        name = unique_name()
        temp = _write_tmp(spool, name, data)
        try:
            rename_no_replace(temp, os.path.join(incoming, name))
        except FileExistsError:
            os.unlink(temp)
            continue
        except BaseException:
            os.unlink(temp)
            raise
        _fsync_dir(incoming)
        return name
    raise FileExistsError(errno.EEXIST, "no free request name", incoming)


def _worker_folders(spool: str) -> List[str]:
    active = os.path.join(spool, "active")
    try:
        return [e.name for e in os.scandir(active) if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
    except OSError:
        return []


def as_items(urls: Union[str, Item, Sequence[Union[str, Item]]], name: Optional[str], sha256: Optional[str],
             expected_bytes: Optional[Union[int, str]], max_bytes: Optional[Union[int, str]]) -> Tuple[Item, ...]:
    """One URL or item, or several; ``name``/``sha256``/sizes belong to a single URL."""
    if isinstance(urls, (str, Item)):
        urls = [urls]
    items = tuple(Item(u) if isinstance(u, str) else u for u in urls)
    per_item = {"name": name, "sha256": sha256, "expected_bytes": expected_bytes, "max_bytes": max_bytes}
    given = {k: v for k, v in per_item.items() if v is not None}
    if given:
        if len(items) != 1:
            raise InvalidRequest(next(iter(given)), f"{', '.join(given)} describe one file: give them per Item "
                                 "when the request has several URLs")
        only = items[0]
        items = (Item(only.url, name if name is not None else only.name,
                      sha256 if sha256 is not None else only.sha256,
                      expected_bytes if expected_bytes is not None else only.expected_bytes,
                      max_bytes if max_bytes is not None else only.max_bytes, list(only.headers)),)
    return items
