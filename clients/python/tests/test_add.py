"""``Spool.add`` writes what ``spoolfetch add`` writes: the same bytes, the same naming rule."""

from __future__ import annotations

import os
import re
import tempfile
import shutil

import pytest

from conftest_client import cli
from spoolfetch import InvalidRequest, Item, Spool

SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

CASES = [
    # (CLI arguments, the same as Python keyword arguments)
    (["https://example.org/a.csv"], {}),
    (["https://example.org/a.csv", "--name", "report.csv", "--sha256", SHA, "--priority", "high",
      "--earliest-start", "2026-11-23T02:00:00Z", "--expected-bytes", "200M", "--max-bytes", "1G",
      "--discretionary", "--header", "Accept: text/csv", "--header", "X-Trace: 1"],
     dict(name="report.csv", sha256=SHA, priority="high", earliest_start="2026-11-23T02:00:00Z",
          expected_bytes="200M", max_bytes="1G", discretionary=True, headers=["Accept: text/csv", "X-Trace: 1"])),
    (["https://example.org/b.bin", "--group", "nightly", "--priority", "low"], dict(group="nightly", priority="low")),
]


def fresh_spool() -> str:
    root = tempfile.mkdtemp(prefix="spoolfetch-py-add-")
    for folder in ("incoming", "tmp", "active"):
        os.makedirs(os.path.join(root, folder))
    return root


def incoming(root: str) -> dict:
    folder = os.path.join(root, "incoming")
    return {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}


@pytest.mark.parametrize("args,kwargs", CASES)
def test_same_bytes_as_the_cli(args, kwargs) -> None:
    a, b = fresh_spool(), fresh_spool()
    try:
        out = cli("add", *args, "--spool", a).stdout.splitlines()
        request = Spool(b).add(args[0], **kwargs)
        by_cli, by_python = incoming(a), incoming(b)
        assert list(by_cli) == [out[0]] and list(by_python) == [request.name]
        assert by_python[request.name] == by_cli[out[0]]
        assert request.marker_path == os.path.join(b, "final", request.name + ".group.done")
        assert out[1] == os.path.join(a, "final", out[0] + ".group.done")
        if "group" in kwargs:
            assert request.name == out[0] == kwargs["group"]
        else:
            pattern = r"add-\d{8}T\d{6}Z-%d-\d+"
            assert re.fullmatch(pattern % os.getpid(), request.name)
            assert re.fullmatch(r"add-\d{8}T\d{6}Z-\d+-1", out[0])
        # Nothing left behind in tmp/ by either.
        assert os.listdir(os.path.join(a, "tmp")) == os.listdir(os.path.join(b, "tmp")) == []
    finally:
        shutil.rmtree(a)
        shutil.rmtree(b)


def test_group_names_follow_the_same_rule_across_cli_and_python() -> None:
    root = fresh_spool()
    try:
        first = cli("add", "https://example.org/a", "--group", "nightly", "--spool", root).stdout.split()[0]
        second = Spool(root).add("https://example.org/a", group="nightly").name
        os.makedirs(os.path.join(root, "done"), exist_ok=True)
        os.rename(os.path.join(root, "incoming", "nightly"), os.path.join(root, "done", "nightly"))
        third = cli("add", "https://example.org/a", "--group", "nightly", "--spool", root).stdout.split()[0]
        fourth = Spool(root).add("https://example.org/a", group="nightly.tar").name
        fifth = Spool(root).add("https://example.org/a", group="nightly.tar").name
        assert (first, second, third, fourth, fifth) == ("nightly", "nightly~1", "nightly~2", "nightly.tar", "nightly~1.tar")
    finally:
        shutil.rmtree(root)


def test_several_items_write_defaults_then_items() -> None:
    root = fresh_spool()
    try:
        request = Spool(root).add(["https://example.org/a.csv", Item("https://example.org/b", name="b.csv", sha256=SHA)],
                                  group="g", deadline="6h", priority="high", headers=["Accept: */*"])
        text = open(os.path.join(root, "incoming", request.name)).read()
        assert text == ("group: g\ndeadline: 6h\npriority: high\nheader: Accept: */*\n"
                        "url: https://example.org/a.csv\nurl: https://example.org/b\nname: b.csv\nsha256: " + SHA + "\n")
    finally:
        shutil.rmtree(root)


@pytest.mark.parametrize("args,kwargs,field", [
    (["https://example.org/a", "--name", "../x"], dict(name="../x"), "name"),
    (["https://example.org/a", "--name", "x.done"], dict(name="x.done"), "name"),
    (["ftp://example.org/a"], {}, "url"),
    (["https://example.org/a", "--sha256", "abc"], dict(sha256="abc"), "sha256"),
    (["https://example.org/a", "--priority", "urgent"], dict(priority="urgent"), "priority"),
    (["https://example.org/a", "--header", "A: b\nurl: http://evil/"], dict(headers=["A: b\nurl: http://evil/"]), "headers"),
    (["https://example.org/a", "--group", ".hidden"], dict(group=".hidden"), "group"),
])
def test_refuses_what_the_cli_refuses_and_writes_nothing(args, kwargs, field) -> None:
    root = fresh_spool()
    try:
        assert cli("add", *args, "--spool", root, check=False).returncode == 2
        with pytest.raises(InvalidRequest) as refused:
            Spool(root).add(args[0], **kwargs)
        assert refused.value.field == field
        assert incoming(root) == {} and os.listdir(os.path.join(root, "tmp")) == []
    finally:
        shutil.rmtree(root)


def test_name_and_sha256_with_several_urls_are_refused() -> None:
    root = fresh_spool()
    try:
        with pytest.raises(InvalidRequest, match="per Item"):
            Spool(root).add(["https://example.org/a", "https://example.org/b"], name="x")
    finally:
        shutil.rmtree(root)


def test_installed_package_is_typed() -> None:
    import spoolfetch
    package = os.path.dirname(spoolfetch.__file__)
    assert os.path.exists(os.path.join(package, "py.typed"))
    if os.environ.get("SPOOLFETCH_TEST_INSTALLED"):
        # make test-python installs it with pip into the venv: that copy is the one imported.
        assert "site-packages" in package
