"""Source listings: the library's real code, read from the installed package when a page runs.

`source_listing(obj, ...)` returns an object that Jupyter, Colab and the static site render
as a highlighted Python block headed by the file and line numbers, so a walkthrough shows the
code the tests test, never a pasted copy that can drift from it.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SourceListing", "source_listing"]


@dataclass(frozen=True)
class SourceListing:
    """One or more source blocks, each (qualified name, path inside the package, first line, last line, code)."""

    blocks: tuple[tuple[str, str, int, int, str], ...]

    @property
    def code(self) -> str:
        return "\n\n".join(b[4] for b in self.blocks)

    def _header(self) -> str:
        files = {b[1] for b in self.blocks}
        spans = ", ".join(f"{b[0]} (lines {b[2]}-{b[3]})" for b in self.blocks)
        return f"{' and '.join(sorted(files))}: {spans}"

    def __repr__(self) -> str:
        return f"# {self._header()}\n{self.code}"

    def _repr_markdown_(self) -> str:
        files = " and ".join(f"`{f}`" for f in sorted({b[1] for b in self.blocks}))
        spans = ", ".join(f"`{b[0]}` (lines {b[2]}-{b[3]})" for b in self.blocks)
        return f"{files}: {spans}\n\n```python\n{self.code}\n```\n"


def _package_path(path: str) -> str:
    """The path from the top-level package down (mlbook/transformer/positional.py), wherever it is installed."""
    parts = Path(path).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "mlbook":
            return "/".join(parts[i:])
    return Path(path).name


def source_listing(*objs: Any) -> SourceListing:
    """The source of each function, class or method in `objs`, dedented, with its file and line span.

    Raises TypeError for an object without Python source (a builtin, an instance).
    """
    if not objs:
        raise TypeError("source_listing needs at least one function, class or method")
    blocks = []
    for obj in objs:
        target = inspect.unwrap(obj)
        try:
            lines, start = inspect.getsourcelines(target)
            path = inspect.getsourcefile(target) or "<unknown>"
        except (OSError, TypeError) as exc:
            raise TypeError(f"no Python source for {obj!r}: pass a function, class or method ({exc})") from None
        name = getattr(target, "__qualname__", getattr(target, "__name__", repr(target)))
        code = textwrap.dedent("".join(lines)).rstrip()
        blocks.append((name, _package_path(path), start, start + len(lines) - 1, code))
    return SourceListing(tuple(blocks))
