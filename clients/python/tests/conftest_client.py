"""Fixtures: the real ``spoolfetch`` binary (``SPOOLFETCH_BIN``, which ``make test-python`` sets),
a temp spool, a daemon on it, and a loopback HTTP server."""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest

ROOT = Path(__file__).resolve().parents[3]


def spoolfetch_bin() -> str:
    path = os.environ.get("SPOOLFETCH_BIN") or str(ROOT / ".build" / "debug" / "spoolfetch")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no spoolfetch binary at {path}: build it (swift build) or set SPOOLFETCH_BIN", pytrace=False)
    return path


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([spoolfetch_bin(), *args], capture_output=True, text=True, timeout=60, check=check)


@pytest.fixture
def spool_dir() -> Iterator[str]:
    root = tempfile.mkdtemp(prefix="spoolfetch-py-")
    for folder in ("incoming", "tmp"):
        os.makedirs(os.path.join(root, folder))
    yield root
    if not os.environ.get("SPOOLFETCH_KEEP_TEST_DIRS"):
        shutil.rmtree(root, ignore_errors=True)


class Daemon:
    def __init__(self, spool: str, extra: List[str]) -> None:
        # Beside the spool's folders, removed with it (SPOOLFETCH_KEEP_TEST_DIRS keeps both).
        self.log = open(os.path.join(spool, "daemon.log"), "a")
        self.process = subprocess.Popen([spoolfetch_bin(), "run", "--spool", spool, *extra],
                                        stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@pytest.fixture
def daemon(spool_dir: str) -> Iterator[Daemon]:
    d = Daemon(spool_dir, [])
    yield d
    d.stop()


class Server:
    """``http.server`` on 127.0.0.1 serving a temp folder (a missing file answers 404)."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="spoolfetch-py-www-")
        #: Paths answered only after this many seconds: a slow origin.
        self.slow: dict = {}
        root, slow = self.root, self.slow

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                super().__init__(*args, directory=root, **kwargs)

            def do_GET(self):  # type: ignore[no-untyped-def]
                time.sleep(slow.get(self.path.lstrip("/"), 0))  # the origin's own slowness
                super().do_GET()

            def log_message(self, *args):  # type: ignore[no-untyped-def]
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def put(self, name: str, data: bytes) -> str:
        with open(os.path.join(self.root, name), "wb") as f:
            f.write(data)
        return f"{self.base}/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    """A skipped test is never counted as passed: the run fails (as it does on pytest's own
    "no tests ran", exit 5)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and reporter.stats.get("skipped") and session.exitstatus == 0:
        session.exitstatus = 1
