"""The PDF edition: every page of the built site printed by Debian's chromium, merged into one file.

    python tools/pdf_book.py                               # _build/html -> _build/pdf/book.pdf (`make pdf`)
    python tools/pdf_book.py --site DIR --out X.pdf --pages 3   # the first 3 pages only

No TeX: the site (`make book`) already holds every page with its maths, code, outputs and
figures. The pages are taken in reading order from the site's own navigation (the root page,
then its sidebar), served on 127.0.0.1 and opened in headless chromium through playwright
(`executable_path`, no browser download; every request off the local server is refused) in
print media at the width of the printed page, so that each plotly figure is drawn, at its
default state, at the size it is printed. Each page is printed once MathJax has typeset it
(its startup promise), every figure is drawn and the fonts are loaded. pypdf merges the
pages into one file with one bookmark per page and turns links between pages of the site
into links inside the PDF (links elsewhere, a DOI or arXiv, stay as they are).
"""

from __future__ import annotations

import argparse
import functools
import html
import http.server
import io
import re
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
A4_WIDTH_MM, MARGIN_MM = 210.0, 14.0
PRINT_WIDTH_PX = round((A4_WIDTH_MM - 2 * MARGIN_MM) / 25.4 * 96)  # CSS pixels across the printed column
TIMEOUT_MS = 60_000
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-extensions", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-default-apps",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
# Screen furniture a printed page does without: navigation, the theme's buttons, the
# "back to top" link, the site's toggles' buttons (what they hide stays hidden).
PRINT_CSS = """
.bd-header, .bd-header-article, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-article,
.prev-next-area, #pst-back-to-top, .header-article, .article-header-buttons, .skip-link, .headerlink,
.theme-switch-button, .search-button { display: none !important; }
.bd-main .bd-content .bd-article-container { max-width: 100% !important; }
div.cell, figure.mlbook-figure, .mlbook-figure .mlbook-plotly { break-inside: avoid; }
pre, .highlight pre, .output pre { white-space: pre-wrap !important; overflow-wrap: anywhere; overflow: visible !important; }
.table-wrapper, .pst-scrollable-table-container, .cell_output { overflow: visible !important; }
h1, h2, h3 { break-after: avoid; }
"""
JS_PLOTS_DRAWN = """() => Array.from(document.querySelectorAll('.js-plotly-plot, .mlbook-plotly, .plotly-graph-div'))
  .every(el => el._fullLayout && el.querySelector('.main-svg'))"""


class PdfError(RuntimeError):
    pass


# ---------------------------------------------------------------------------
# The pages, in reading order, from the built site
# ---------------------------------------------------------------------------


def _text(fragment: str) -> str:
    """Visible text of an HTML fragment (a heading's permalink "#" left out)."""
    fragment = re.sub(r"<a class=[\"']headerlink[^>]*>.*?</a>", "", fragment, flags=re.DOTALL)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def root_page(site: Path) -> str:
    """The site's first page (index.html redirects to it)."""
    index = (site / "index.html").read_text(encoding="utf-8", errors="replace")
    m = re.search(r'http-equiv="refresh"[^>]*url=([^"\'>]+)', index, re.IGNORECASE)
    return m.group(1).strip() if m else "index.html"


def site_pages(site: Path) -> list[tuple[str, str]]:
    """(page path relative to the site, title) in reading order: the root page, then its sidebar."""
    if not (site / "index.html").is_file():
        raise PdfError(f"no built site at {site}: run `make book` first")
    root = root_page(site)
    text = (site / root).read_text(encoding="utf-8", errors="replace")
    title = re.search(r"<h1[^>]*>(.*?)</h1>", text, re.DOTALL)
    pages = [(root, _text(title.group(1)) if title else root)]
    nav = re.search(r'<nav class="[^"]*\bbd-docs-nav\b[^>]*>(.*?)</nav>', text, re.DOTALL)
    if nav is None:
        raise PdfError(f"{root}: no sidebar navigation found (is this a Jupyter Book site?)")
    base = urllib.parse.urljoin("/", root)
    for href, label in re.findall(r'<a class="reference internal[^"]*" href="([^"#]+)[^"]*"[^>]*>(.*?)</a>',
                                  nav.group(1), re.DOTALL):
        rel = urllib.parse.urljoin(base, href).lstrip("/")
        if rel not in [p for p, _ in pages] and (site / rel).is_file():
            pages.append((rel, _text(label)))
    return pages


# ---------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """The site on http://127.0.0.1:PORT while the block runs."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _route(route: Any) -> None:
    host = urllib.parse.urlsplit(route.request.url).hostname or ""
    route.continue_() if host in ("127.0.0.1", "localhost") else route.abort("blockedbyclient")


def print_page(browser: Any, url: str) -> bytes:
    """One page as PDF bytes, printed once its maths is typeset and its figures are drawn."""
    context = browser.new_context(viewport={"width": PRINT_WIDTH_PX, "height": 1100})
    context.set_default_timeout(TIMEOUT_MS)
    context.route("**/*", _route)
    try:
        page = context.new_page()
        page.emulate_media(media="print", color_scheme="light")
        page.goto(url, wait_until="load")
        page.add_style_tag(content=PRINT_CSS)
        if page.evaluate("!!document.querySelector('.math, mjx-container, .mathjax_process')"):
            page.wait_for_function("!!(window.MathJax && window.MathJax.startup && window.MathJax.startup.promise)")
            page.evaluate("window.MathJax.startup.promise.then(() => true)")
        page.wait_for_function(JS_PLOTS_DRAWN)
        page.evaluate("document.fonts.ready.then(() => true)")
        margin = f"{MARGIN_MM}mm"
        return page.pdf(format="A4", print_background=True, margin={"top": margin, "bottom": margin,
                                                                     "left": margin, "right": margin})
    finally:
        context.close()


# ---------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------


def merge(parts: list[tuple[str, str, bytes]], base_url: str, title: str) -> Any:
    """One pypdf writer: the pages' PDFs in order, a bookmark per page, site links made internal."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, DictionaryObject, NameObject, NumberObject

    writer = PdfWriter()
    first: dict[str, int] = {}
    for rel, label, data in parts:
        first[rel] = len(writer.pages)
        writer.append(PdfReader(io.BytesIO(data)), outline_item=label)
    writer.add_metadata({"/Title": title, "/Creator": "mlbook tools/pdf_book.py (chromium, pypdf)"})
    host = urllib.parse.urlsplit(base_url).netloc
    for page in writer.pages:
        for ref in page.get("/Annots", []) or []:
            annot = ref.get_object()
            action = annot.get("/A")
            uri = action.get_object().get("/URI") if action is not None else None
            if not uri or urllib.parse.urlsplit(str(uri)).netloc != host:
                continue
            target = urllib.parse.urlsplit(str(uri)).path.lstrip("/")
            if target in first:  # a link to another page of the book: go to that page's start
                dest = ArrayObject([writer.pages[first[target]].indirect_reference, NameObject("/XYZ"),
                                    NumberObject(0), NumberObject(10_000), NumberObject(0)])
                annot[NameObject("/A")] = DictionaryObject({NameObject("/S"): NameObject("/GoTo"),
                                                            NameObject("/D"): dest})
            else:  # a file of the site that is not a page (an .ipynb, the search): no link
                del annot["/A"]
    return writer


def build_pdf(site: Path, out: Path, *, chromium: str = CHROMIUM, limit: int | None = None,
              log: Any = print) -> Path:
    """Print the site's pages (the first `limit` if given) and merge them into `out`."""
    from playwright.sync_api import sync_playwright

    if not Path(chromium).exists():
        raise PdfError(f"{chromium} not found: install Debian's chromium (`make chromium`)")
    pages = site_pages(site)[:limit]
    parts: list[tuple[str, str, bytes]] = []
    with serve(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            for i, (rel, label) in enumerate(pages, 1):
                log(f"[pdf] {i}/{len(pages)} {rel}")
                parts.append((rel, label, print_page(browser, f"{base}/{rel}")))
        finally:
            browser.close()
        title = pages[0][1] if pages else "book"
        writer = merge(parts, base, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as fh:
        writer.write(fh)
    log(f"[pdf] {out}: {len(writer.pages)} pages from {len(parts)} pages of the site")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf" / "book.pdf")
    ap.add_argument("--chromium", default=CHROMIUM)
    ap.add_argument("--pages", type=int, default=None, help="print only the first N pages (a quick look)")
    args = ap.parse_args(argv)
    try:
        build_pdf(args.site, args.out, chromium=args.chromium, limit=args.pages)
    except PdfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
