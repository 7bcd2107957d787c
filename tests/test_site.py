"""The built site, checked as a reader's browser sees it, plus the repository-URL contract.

Browser tests (`-m browser`, run by `make test` after the strict build): serve
`_build/html` on 127.0.0.1 and open every page in headless Debian Chromium, driven over
the DevTools protocol (a small client on `websocket-client`; no browser download).
Every request that does not go to the local server is failed and recorded. Per page:

* no console errors, uncaught exceptions or failed loads;
* every plotly figure is drawn (`_fullLayout` and `.main-svg` exist), and every figure
  has a caption and alt text;
* clicking the far end of each plotly slider changes the plotted data;
* all maths is typeset: each `.math` element holds MathJax output, no TeX error, and no
  raw `\\(`, `\\[` or `$$` left in the text;
* no request left localhost; notebook pages link to Colab and to their .ipynb;
* the page's HTML plus its own data (everything it loads outside `_static/`) < 2 MB.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("MLBOOK_SITE", ROOT / "_build" / "html"))
CHROMIUM = os.environ.get("MLBOOK_CHROMIUM", "/usr/bin/chromium")
PAGE_BUDGET_BYTES = 2 * 1024 * 1024
PAGE_TIMEOUT_S = 30.0
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


# ---------------------------------------------------------------------------
# Repository URL: set once in _config.yml, used by every notebook's Colab cell
# ---------------------------------------------------------------------------


def _config() -> dict[str, Any]:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())


def _notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_colab_setup_cells_use_config_url() -> None:
    url = _config()["repository"]["url"].rstrip("/")
    notebooks = _notebooks()
    assert notebooks, "no notebooks found under notebooks/"
    for path in notebooks:
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert code, f"{path.name} has no code cell"
        first = "".join(code[0]["source"])
        assert "google.colab" in first, f"{path.name}: first code cell is not the Colab setup cell (no google.colab)"
        assert f"git+{url}" in first, (
            f"{path.name}: the Colab setup cell must install from the repository URL in _config.yml ({url}); "
            f"it reads:\n{first}"
        )


def test_every_notebook_is_in_the_toc() -> None:
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.add(str(node["file"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc)
    missing = [p.name for p in _notebooks() if f"notebooks/{p.stem}" not in files]
    assert not missing, f"notebooks missing from _toc.yml (add them in reading order): {missing}"


# ---------------------------------------------------------------------------
# A minimal DevTools-protocol client
# ---------------------------------------------------------------------------


class CDPError(RuntimeError):
    pass


class Tab:
    """One browser tab over the DevTools protocol, recording what the checks need."""

    def __init__(self, ws_url: str) -> None:
        import websocket  # websocket-client

        self._ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self._next_id = 0
        self._lock = threading.Lock()
        self._pending: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self.console_errors: list[str] = []
        self.offsite_requests: list[str] = []
        self.local_requests: list[str] = []
        self.load_fired = threading.Event()
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- transport ---------------------------------------------------------
    def _send(self, method: str, params: dict[str, Any] | None = None) -> int:
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        return msg_id

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        msg_id = self._send(method, params)
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise CDPError(f"{method}: no answer within {timeout:.0f} s")
                self._cond.wait(left)
            msg = self._pending.pop(msg_id)
        if "error" in msg:
            raise CDPError(f"{method}: {msg['error']}")
        return msg.get("result", {})

    def _read_loop(self) -> None:
        while True:
            try:
                raw = self._ws.recv()
            except Exception:
                break
            if not raw:
                continue
            msg = json.loads(raw)
            if "id" in msg:
                with self._cond:
                    self._pending[msg["id"]] = msg
                    self._cond.notify_all()
            else:
                try:
                    self._on_event(msg["method"], msg.get("params", {}))
                except Exception as exc:  # never let the reader die silently
                    self.console_errors.append(f"[test client] {exc!r}")
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- events -------------------------------------------------------------
    def _on_event(self, method: str, p: dict[str, Any]) -> None:
        if method == "Fetch.requestPaused":
            url = p["request"]["url"]
            host = urllib.parse.urlsplit(url).hostname or ""
            if host in LOCAL_HOSTS:
                self.local_requests.append(url)
                self._send("Fetch.continueRequest", {"requestId": p["requestId"]})
            else:
                self.offsite_requests.append(url)
                self._send("Fetch.failRequest", {"requestId": p["requestId"], "errorReason": "BlockedByClient"})
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            parts = [a.get("value", a.get("description", "")) for a in p.get("args", [])]
            self.console_errors.append("console.error: " + " ".join(str(x) for x in parts))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            desc = d.get("exception", {}).get("description") or d.get("text", "")
            self.console_errors.append(f"uncaught exception: {desc} ({d.get('url', '')}:{d.get('lineNumber', '')})")
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            e = p["entry"]
            self.console_errors.append(f"log error [{e.get('source')}]: {e.get('text')} {e.get('url', '')}")
        elif method == "Page.loadEventFired":
            self.load_fired.set()

    # -- helpers ------------------------------------------------------------
    def enable(self) -> None:
        self.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def js(self, expression: str, *, await_promise: bool = False, timeout: float = 30.0) -> Any:
        res = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
            timeout=timeout,
        )
        if "exceptionDetails" in res:
            raise CDPError(f"JS failed: {res['exceptionDetails'].get('exception', {}).get('description')}")
        return res.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

    def click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" else "none", "clickCount": 1},
            )

    def close(self) -> None:
        try:
            self._ws.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Fixtures: a local server and one headless Chromium
# ---------------------------------------------------------------------------


def _site_pages() -> list[str]:
    if not SITE.is_dir():
        return []
    pages = []
    for p in sorted(SITE.rglob("*.html")):
        rel = p.relative_to(SITE).as_posix()
        if rel.split("/")[0] in {"_static", "_sources", "_images", "_downloads", "jupyter_execute"}:
            continue
        if 'http-equiv="refresh"' in p.read_text(errors="replace")[:2000].lower():
            continue  # a redirect stub (index.html), not a page
        pages.append(rel)
    return pages


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    if not (SITE / "book" / "intro.html").is_file():
        pytest.fail(f"no built site at {SITE}: run `make book` (or the strict build) first")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    socketserver.TCPServer.allow_reuse_address = True
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[str]:
    """Start headless Chromium; yields the DevTools HTTP endpoint."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: `make test` installs Debian's chromium (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="mlbook-chromium-")
    args = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--metrics-recording-only",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--window-size=1280,900",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "--remote-allow-origins=*",
        f"--user-data-dir={profile}",
        "about:blank",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = Path(profile) / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not (port_file.is_file() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("headless Chromium did not start (no DevToolsActivePort within 30 s)")
        time.sleep(0.1)
    port = port_file.read_text().split()[0]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def _open_tab(endpoint: str) -> tuple[Tab, str]:
    req = urllib.request.Request(f"{endpoint}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=10) as r:
        info = json.load(r)
    return Tab(info["webSocketDebuggerUrl"]), info["id"]


def _close_tab(endpoint: str, tab: Tab, target_id: str) -> None:
    tab.close()
    try:
        urllib.request.urlopen(f"{endpoint}/json/close/{target_id}", timeout=10).read()
    except Exception:
        pass


# ---------------------------------------------------------------------------
# In-page probes
# ---------------------------------------------------------------------------

JS_PLOTS = """
(() => Array.from(document.querySelectorAll('.js-plotly-plot, .mlbook-plotly, .plotly-graph-div')).map(el => ({
  id: el.id,
  drawn: !!(el._fullLayout && el.querySelector('.main-svg')),
  sliders: (el.layout && el.layout.sliders) ? el.layout.sliders.length : 0,
})))()
"""

JS_FIGURES = """
(() => Array.from(document.querySelectorAll('figure.mlbook-figure')).map(f => {
  const plot = f.querySelector('.mlbook-plotly');
  const cap = f.querySelector('figcaption');
  return {id: f.id, alt: plot ? (plot.getAttribute('aria-label') || '') : '',
          role: plot ? plot.getAttribute('role') : null, caption: cap ? cap.textContent.trim() : ''};
}))()
"""

JS_ALL_DRAWN = """
(() => Array.from(document.querySelectorAll('.js-plotly-plot, .mlbook-plotly, .plotly-graph-div'))
  .every(el => el._fullLayout && el.querySelector('.main-svg')))()
"""

JS_MATH = """
(() => {
  const maths = Array.from(document.querySelectorAll('.math'));
  const untypeset = maths.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 80));
  const errors = Array.from(document.querySelectorAll('mjx-merror')).map(e => e.getAttribute('data-mjx-error') || e.textContent);
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll('script, style, pre, code, textarea, mjx-container, .highlight, .MathJax').forEach(n => n.remove());
  const text = clone.textContent;
  const raw = [];
  for (const delim of ['\\\\(', '\\\\[', '$$']) {
    const at = text.indexOf(delim);
    if (at >= 0) raw.push(text.slice(Math.max(0, at - 40), at + 60).replace(/\\s+/g, ' '));
  }
  return {n_math: maths.length, n_mjx: document.querySelectorAll('mjx-container').length,
          untypeset, errors, raw, mathjax: !!(window.MathJax && window.MathJax.startup)};
})()
"""


def _slider_state(tab: Tab, div_id: str) -> dict[str, Any]:
    return tab.js(
        f"""(() => {{ const gd = document.getElementById({json.dumps(div_id)});
        const s = gd.layout.sliders[0];
        const sig = JSON.stringify(gd.data.map(t => [t.x, t.y, t.z]));
        return {{active: s.active || 0, n: s.steps.length, sig: sig.length + ':' + sig}}; }})()"""
    )


def _slider_rail(tab: Tab, div_id: str) -> dict[str, float]:
    return tab.js(
        f"""(() => {{ const gd = document.getElementById({json.dumps(div_id)});
        gd.scrollIntoView({{block: 'center'}});
        const r = gd.querySelector('.slider-rail-touch-rect').getBoundingClientRect();
        return {{left: r.left, right: r.right, top: r.top, bottom: r.bottom}}; }})()"""
    )


def _move_slider(tab: Tab, div_id: str) -> None:
    before = _slider_state(tab, div_id)
    assert before["n"] >= 2, f"slider on #{div_id} has {before['n']} step(s); nothing to move"
    rail = _slider_rail(tab, div_id)
    time.sleep(0.2)  # let the scroll settle before reading coordinates again
    rail = _slider_rail(tab, div_id)
    to_last = before["active"] < before["n"] - 1
    x = rail["right"] - 3 if to_last else rail["left"] + 3
    y = (rail["top"] + rail["bottom"]) / 2
    target = before["n"] - 1 if to_last else 0
    tab.click(x, y)
    deadline = time.monotonic() + 10
    after = before
    while time.monotonic() < deadline:
        after = _slider_state(tab, div_id)
        if after["active"] == target and after["sig"] != before["sig"]:
            return
        time.sleep(0.1)
    raise AssertionError(
        f"moving the slider on #{div_id} to step {target} did not change the plotted data "
        f"(active {before['active']} -> {after['active']}, data changed: {after['sig'] != before['sig']})"
    )


def _page_weight(page: str, local_requests: list[str]) -> tuple[int, dict[str, int]]:
    """HTML of the page plus every file it loaded from outside `_static/` (shared assets)."""
    parts: dict[str, int] = {page: (SITE / page).stat().st_size}
    for url in set(local_requests):
        path = urllib.parse.unquote(urllib.parse.urlsplit(url).path).lstrip("/")
        if not path or path.startswith("_static/") or path == page:
            continue
        f = SITE / path
        if f.is_file():
            parts[path] = f.stat().st_size
    return sum(parts.values()), parts


def _check_notebook_buttons(tab: Tab, page: str) -> None:
    """A notebook page offers a Colab launch link and the .ipynb download, from _config.yml."""
    cfg = _config()
    repo = urllib.parse.urlsplit(cfg["repository"]["url"]).path.strip("/")
    nb = page[: -len(".html")] + ".ipynb"
    colab = f"{cfg['launch_buttons']['colab_url'].rstrip('/')}/github/{repo}/blob/{cfg['repository']['branch']}/{nb}"
    hrefs = tab.js("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    assert colab in hrefs, f"{page}: no Colab launch link to {colab}"
    downloads = [h for h in hrefs if h.endswith(f"/_sources/{nb}")]
    assert downloads, f"{page}: no .ipynb download link (_sources/{nb})"
    assert (SITE / "_sources" / nb).is_file(), f"{page}: the downloadable _sources/{nb} is missing from the site"


# ---------------------------------------------------------------------------
# The check, once per page
# ---------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("page", _site_pages() or ["book/intro.html"])
def test_page_in_browser(page: str, server: str, browser: str) -> None:
    tab, target_id = _open_tab(browser)
    try:
        tab.enable()
        tab.call("Page.navigate", {"url": f"{server}/{page}"})
        if not tab.load_fired.wait(PAGE_TIMEOUT_S):
            raise AssertionError(f"{page}: load event not fired within {PAGE_TIMEOUT_S:.0f} s")
        tab.wait_for("document.readyState === 'complete'", 15, "document ready")
        # MathJax typesets after load; wait for its first pass where the page has maths.
        if tab.js("!!document.querySelector('.math')"):
            tab.wait_for("!!(window.MathJax && window.MathJax.startup && window.MathJax.startup.promise)", 20, "MathJax to load")
            tab.js("window.MathJax.startup.promise.then(() => true)", await_promise=True, timeout=30)
        plots = tab.js(JS_PLOTS)
        if plots:
            try:
                tab.wait_for(JS_ALL_DRAWN, 20, "plotly figures to draw")
            except AssertionError:
                pass  # reported precisely below
            plots = tab.js(JS_PLOTS)
        undrawn = [p["id"] for p in plots if not p["drawn"]]
        assert not undrawn, f"{page}: plotly figures not drawn: {undrawn}"

        for fig in tab.js(JS_FIGURES):
            assert fig["caption"], f"{page}: figure #{fig['id']} has no caption"
            assert fig["alt"] and fig["role"] == "img", f"{page}: figure #{fig['id']} has no alt text (role=img, aria-label)"

        for p in plots:
            if p["sliders"]:
                _move_slider(tab, p["id"])

        math = tab.js(JS_MATH)
        assert not math["untypeset"], f"{page}: maths not typeset by MathJax: {math['untypeset'][:5]}"
        assert not math["errors"], f"{page}: MathJax TeX errors: {math['errors'][:5]}"
        assert not math["raw"], f"{page}: raw TeX delimiters left in the text: {math['raw']}"
        if math["n_math"]:
            assert math["n_mjx"] >= math["n_math"], f"{page}: {math['n_math']} maths elements, {math['n_mjx']} typeset"

        if page.startswith("notebooks/") and page.endswith(".html"):
            _check_notebook_buttons(tab, page)

        time.sleep(0.3)  # let late console messages and requests arrive
        assert not tab.offsite_requests, f"{page}: requests left localhost: {sorted(set(tab.offsite_requests))}"
        assert not tab.console_errors, f"{page}: console errors:\n" + "\n".join(tab.console_errors)

        weight, parts = _page_weight(page, tab.local_requests)
        detail = ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sorted(parts.items()))
        print(f"\n[page weight] {page}: {weight / 1024:.0f} KiB ({detail}); {len(plots)} plot(s), {math['n_math']} maths")
        assert weight < PAGE_BUDGET_BYTES, f"{page}: {weight / 1e6:.2f} MB of HTML+data exceeds the 2 MB budget"
    finally:
        _close_tab(browser, tab, target_id)


# ---------------------------------------------------------------------------
# `python tests/test_site.py screenshot PAGE ELEMENT_ID OUT.png`: the README's picture
# ---------------------------------------------------------------------------


def _screenshot(page: str, element_id: str, out: str) -> None:
    import base64
    import contextlib

    srv = contextlib.contextmanager(server.__wrapped__)()  # type: ignore[attr-defined]
    brw = contextlib.contextmanager(browser.__wrapped__)()  # type: ignore[attr-defined]
    with srv as base, brw as endpoint:
        tab, target_id = _open_tab(endpoint)
        try:
            tab.enable()
            tab.call("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 760, "deviceScaleFactor": 1, "mobile": False})
            tab.call("Page.navigate", {"url": f"{base}/{page}"})
            tab.load_fired.wait(PAGE_TIMEOUT_S)
            tab.wait_for(JS_ALL_DRAWN, 30, "plotly figures to draw")
            tab.js(f"document.getElementById({json.dumps(element_id)}).scrollIntoView({{block: 'center'}})")
            time.sleep(1.0)
            shot = tab.call("Page.captureScreenshot", {"format": "png"})
            Path(out).write_bytes(base64.b64decode(shot["data"]))
        finally:
            _close_tab(endpoint, tab, target_id)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 5 or sys.argv[1] != "screenshot":
        sys.exit("usage: python tests/test_site.py screenshot PAGE ELEMENT_ID OUT.png")
    _screenshot(sys.argv[2], sys.argv[3], sys.argv[4])
    print(f"{sys.argv[4]}: {Path(sys.argv[4]).stat().st_size / 1024:.0f} KiB")
