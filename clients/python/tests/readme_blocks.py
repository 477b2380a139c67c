"""The README's example blocks, so that tests run exactly what the README shows."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def python_block(section: str) -> str:
    """The first ```python block under the README heading ``section`` (e.g. ``### From Python``)."""
    text = (ROOT / "README.md").read_text()
    start = text.index("\n" + section + "\n")
    block = text.index("```python\n", start) + len("```python\n")
    return text[block:text.index("```\n", block)]
