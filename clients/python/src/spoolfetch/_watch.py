"""Names arriving in a few folders: inotify through ``ctypes``, or polling where inotify sees nothing.

The daemon's own ``spoolfetch wait`` and ``events --follow`` block on inotify; this module does the
same with libc's ``inotify_init1``/``inotify_add_watch`` (no dependency). On a filesystem whose
changes inotify does not report -- NFS or a FUSE mount written from another machine, where
``inotify_add_watch`` succeeds but no event ever comes -- pass ``poll_interval`` (or set the
environment variable ``SPOOLFETCH_POLL`` to a number of seconds): the folders are then listed again
every ``poll_interval`` seconds. Where inotify itself is unavailable (``inotify_init1`` fails), the
watch falls back to polling every :data:`DEFAULT_POLL_INTERVAL` seconds by itself.

Set a watch up *before* listing its folders: whatever lands after it is reported, whatever landed
before is in the listing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import os
import select
import struct
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

#: Seconds between two listings when polling and no interval was given.
DEFAULT_POLL_INTERVAL = 0.5

_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = _IN_MOVED_TO | _IN_CLOSE_WRITE | _IN_CREATE
_EVENT = struct.Struct("iIII")


class ListAgain:
    """Names may have been missed (the kernel's queue overflowed, a missing folder appeared, or a
    poll interval passed): list the folders again."""

    def __repr__(self) -> str:
        return "LIST_AGAIN"


LIST_AGAIN = ListAgain()

#: What :meth:`FolderWatch.next` returns: names that arrived (folder index, name), ``LIST_AGAIN``,
#: or an empty list when the timeout passed.
Arrivals = Union[List[Tuple[int, str]], ListAgain]


def poll_interval_from_env() -> Optional[float]:
    """``SPOOLFETCH_POLL`` as seconds, when set (forces polling)."""
    text = os.environ.get("SPOOLFETCH_POLL", "").strip()
    if not text:
        return None
    value = float(text)
    if not value > 0:
        raise ValueError(f"SPOOLFETCH_POLL must be a positive number of seconds, got {text!r}")
    return value


def _libc() -> Optional[ctypes.CDLL]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


class FolderWatch:
    """Watches ``folders``; :meth:`next` blocks until names arrive, the folders must be listed
    again, or a timeout passes.

    ``poll_interval``: poll instead of using inotify (see the module's doc); ``None`` reads
    ``SPOOLFETCH_POLL``. :attr:`mode` says which is in use (``"inotify"`` or ``"poll"``).
    """

    def __init__(self, folders: Sequence[str], poll_interval: Optional[float] = None) -> None:
        self.folders = list(folders)
        if poll_interval is None:
            poll_interval = poll_interval_from_env()
        self._fd = -1
        self._wd: Dict[int, int] = {}
        self._missing: Dict[int, List[int]] = {}
        self._next_poll = 0.0
        libc = None if poll_interval is not None else _libc()
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC) if libc is not None else -1
        if fd < 0:
            self.mode = "poll"
            self.poll_interval = poll_interval if poll_interval is not None else DEFAULT_POLL_INTERVAL
            self._next_poll = time.monotonic() + self.poll_interval
            return
        assert libc is not None
        self.mode = "inotify"
        self.poll_interval = 0.0
        self._fd = fd
        self._libc = libc
        for index, folder in enumerate(self.folders):
            self._watch(index, folder)

    def _add(self, path: str, mask: int) -> int:
        return int(self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask))

    def _watch(self, index: int, folder: str) -> None:
        wd = self._add(folder, _MASK)
        if wd >= 0:
            self._wd[wd] = index
            return
        code = ctypes.get_errno()
        if code == errno.ENOENT:
            parent = os.path.dirname(folder.rstrip("/")) or "/"
            pwd = self._add(parent, _IN_CREATE | _IN_MOVED_TO | _IN_ONLYDIR)
            again = self._add(folder, _MASK)  # made between the two calls
            if again >= 0:
                self._wd[again] = index
                return
            if pwd >= 0:
                self._missing.setdefault(pwd, []).append(index)
                return
            code = ctypes.get_errno()
        self.close()
        raise OSError(code, f"inotify_add_watch: {os.strerror(code)}", folder)

    def fileno(self) -> int:
        """The inotify descriptor (``-1`` when polling): readable when names arrived."""
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "FolderWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next(self, timeout: Optional[float]) -> Arrivals:
        """Blocks at most ``timeout`` seconds (``None``: no limit)."""
        if self.mode == "poll":
            return self._poll_wait(timeout, time.sleep)
        found = self.read_now()
        if found:
            return found
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.poll(None if timeout is None else max(0, int(timeout * 1000) + 1))
        return self.read_now()

    async def next_async(self, timeout: Optional[float]) -> Arrivals:
        """:meth:`next` for an event loop: waits on the descriptor with ``add_reader``."""
        if self.mode == "poll":
            remaining = self._poll_remaining(timeout)
            await asyncio.sleep(remaining)
            return self._poll_due()
        found = self.read_now()
        if found:
            return found
        loop = asyncio.get_running_loop()
        ready: "asyncio.Future[None]" = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self._fd, readable)
        try:
            await asyncio.wait_for(ready, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            loop.remove_reader(self._fd)
        return self.read_now()

    def _poll_remaining(self, timeout: Optional[float]) -> float:
        remaining = max(0.0, self._next_poll - time.monotonic())
        return remaining if timeout is None else min(remaining, max(0.0, timeout))

    def _poll_due(self) -> Arrivals:
        if time.monotonic() >= self._next_poll:
            self._next_poll = time.monotonic() + self.poll_interval
            return LIST_AGAIN
        return []

    def _poll_wait(self, timeout: Optional[float], sleep: Callable[[float], None]) -> Arrivals:
        # The fallback's whole point: look again after the interval.
        sleep(self._poll_remaining(timeout))
        return self._poll_due()

    def read_now(self) -> Arrivals:
        """What the kernel has queued, without blocking."""
        names: List[Tuple[int, str]] = []
        again = False
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                break
            if not data:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size: offset + _EVENT.size + length]
                offset += _EVENT.size + length
                name = os.fsdecode(raw.split(b"\0", 1)[0])
                if mask & _IN_Q_OVERFLOW:
                    again = True
                elif wd in self._missing:
                    for index in list(self._missing[wd]):
                        folder = self.folders[index]
                        if os.path.basename(folder.rstrip("/")) == name:
                            w = self._add(folder, _MASK)
                            if w >= 0:
                                self._wd[w] = index
                                self._missing[wd].remove(index)
                                again = True
                elif wd in self._wd and name and not mask & _IN_IGNORED:
                    names.append((self._wd[wd], name))
        if again:
            return LIST_AGAIN
        return names
