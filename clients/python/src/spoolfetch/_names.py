"""Which request a name stands for, as ``spoolfetch wait`` resolves it (``RequestName`` in the
daemon's sources): a request file's name is reused (the next night's ``nightly``), and the daemon
claims it as ``R~1``, ``R~2``, ... while an ended request still holds ``R``; a name means the newest
request of that name -- one queued in ``incoming/`` (followed by its inode into its claim), else the
claimed one with the highest ``~N``, else the ended one with the highest ``~N``."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Iterator, List, Optional


def suffixed(name: str, n: int, separator: str = "~") -> str:
    """``name`` with ``~N`` before its extension, as the daemon names a taken name's successor."""
    dot = name.rfind(".")
    if dot > 0:
        candidate = f"{name[:dot]}{separator}{n}{name[dot:]}"
        if len(candidate.encode()) <= 255:
            return candidate
    stem = name
    while len((stem + f"{separator}{n}").encode()) > 255:
        stem = stem[:-1]
    return f"{stem}{separator}{n}"


def candidates(given: str) -> Iterator[str]:
    """``R``, then ``R~1`` ... ``R~999`` (the daemon's own limit)."""
    yield given
    for n in range(1, 1000):
        yield suffixed(given, n)


def follows_request(group: str, request: str) -> bool:
    """Whether ``request`` is ``group`` or ``group~N`` as a claim names it."""
    if request == group:
        return True
    return any(suffixed(group, n) == request for n in _tilde_numbers(request))


def _tilde_numbers(request: str) -> List[int]:
    found = []
    for i, ch in enumerate(request):
        if ch == "~":
            digits = ""
            for c in request[i + 1:]:
                if not c.isdigit():
                    break
                digits += c
            if digits and not digits.startswith("0"):
                found.append(int(digits))
    return found


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
        return True
    except OSError:
        return False


def inode(path: str) -> Optional[int]:
    """The inode of a regular file at ``path`` (not followed), else ``None``."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino if stat.S_ISREG(st.st_mode) else None


def claim_paths(name: str, spool: str) -> List[str]:
    """``active/R`` and ``active/W/R`` for each worker folder."""
    try:
        workers = [w for w in os.listdir(os.path.join(spool, "active")) if not w.startswith(".")]
    except OSError:
        workers = []
    return [os.path.join(spool, "active", name)] + [os.path.join(spool, "active", w, name) for w in workers]


def ended_paths(name: str, spool: str) -> List[str]:
    return [os.path.join(spool, folder, name) for folder in ("done", "failed", "rejected")]


@dataclass
class Target:
    """What a name stands for: the request's name on the spool once known, or the inode of the
    queued ``incoming/R`` (followed into its claim: a rename keeps the inode)."""

    name: Optional[str] = None
    queued_inode: Optional[int] = None


def claimed(given: str, queued_inode: int, spool: str) -> Optional[str]:
    """The name the request queued as ``incoming/given`` has now, once claimed (or ended)."""
    for name in candidates(given):
        paths = claim_paths(name, spool) + ended_paths(name, spool)
        if any(inode(p) == queued_inode for p in paths):
            return name
        if name != given and not any(_exists(p) for p in paths):
            return None
    return None


def newest(given: str, spool: str, final_folder: str) -> Target:
    """The newest request of the name ``given`` (see the module's doc)."""
    queued = inode(os.path.join(spool, "incoming", given))
    if queued is not None:
        return Target(claimed(given, queued, spool), queued)
    family = []
    for name in candidates(given):
        held = (any(_exists(p) for p in claim_paths(name, spool))
                or any(_exists(p) for p in ended_paths(name, spool))
                or _exists(os.path.join(final_folder, name + ".group.done")))
        if held:
            family.append(name)
        elif name != given:
            break
    live = [n for n in family if any(_exists(p) for p in claim_paths(n, spool))]
    if live:
        return Target(live[-1])
    return Target(family[-1] if family else None)
