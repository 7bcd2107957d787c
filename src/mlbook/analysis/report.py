"""Check cells' output, shown collapsed wherever a notebook is opened.

    CheckReport, check_report   what a check cell prints, as plain text (what nbval compares) and as a
                                collapsed <details> block in HTML (Jupyter, Colab and the site), so a
                                printed answer stays hidden until the reader opens it

Used by page 6's check cells (through `mlbook.analysis.interview`) and by exercise cells whose checker's
verdict names the fix. Nothing here computes or draws.
"""

from __future__ import annotations

import contextlib
import html
import io
import sys
from collections.abc import Iterator

__all__ = ["CheckReport", "check_report"]


class CheckReport:
    """A check cell's printed text. Its plain-text repr is the text (what nbval compares); its HTML repr is
    a collapsed `<details>` block, which Jupyter, Colab and the site all render closed until opened
    (Colab and VS Code ignore a cell's `jupyter.outputs_hidden`)."""

    def __init__(self, text: str, summary: str = "Check") -> None:
        if not isinstance(text, str) or not isinstance(summary, str) or not summary:
            raise TypeError(f"text and summary must be strings (summary not empty), got {text!r}, {summary!r}")
        self.text, self.summary = text, summary

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return (f"<details><summary>{html.escape(self.summary)}</summary>"
                f"<pre>{html.escape(self.text)}</pre></details>")


@contextlib.contextmanager
def check_report(summary: str = "Check") -> Iterator[None]:
    """Collect what the block prints and show it as one `CheckReport` when the block ends: a collapsed
    `<details>` in a notebook (through IPython's `display`), the plain text elsewhere. If the block
    raises, what it printed so far goes to stdout before the error propagates."""
    CheckReport("", summary)  # validates summary
    buffer, saved = io.StringIO(), sys.stdout
    sys.stdout = buffer
    try:
        yield
    except BaseException:
        sys.stdout = saved
        saved.write(buffer.getvalue())
        raise
    sys.stdout = saved
    report = CheckReport(buffer.getvalue().rstrip("\n"), summary)
    shell = None
    if "IPython" in sys.modules:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        print(report.text)
    else:
        from IPython.display import display

        display(report)
