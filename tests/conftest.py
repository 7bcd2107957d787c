"""Fixtures shared by the figure tests."""

from __future__ import annotations

import pytest

from mlbook.viz import core


@pytest.fixture
def displayed(monkeypatch):
    import IPython.display

    calls: list = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: calls.append((objs, kw)))
    return calls


@pytest.fixture
def live(monkeypatch):
    monkeypatch.delenv(core.STATIC_ENV, raising=False)
