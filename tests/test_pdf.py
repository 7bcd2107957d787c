"""The PDF edition (`make pdf`, tools/pdf_book.py), checked against the built site it was printed from.

Browser tests (`-m browser`, the PDF itself): `make test` prints the site into `_build/pdf/book.pdf` beside the
browser check, then runs this file. `MLBOOK_SITE` and `MLBOOK_PDF` point elsewhere. The page
titles are read from the site's own HTML (every page with an `<h1>`), not from the tool's list,
so a page the tool skipped is caught. The page list itself is tested on a made-up site.
"""

from __future__ import annotations

import html
import os
import re
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("MLBOOK_SITE", ROOT / "_build" / "html"))
PDF = Path(os.environ.get("MLBOOK_PDF", ROOT / "_build" / "pdf" / "book.pdf"))
NOT_IN_THE_BOOK = {"genindex.html", "search.html"}

sys.path.insert(0, str(ROOT / "tools"))


def _norm(text: str) -> str:
    """Text as compared: ligatures unfolded (NFKC), quotes straightened, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.split())


def site_titles() -> dict[str, str]:
    """{page: its <h1> as text} for every page of the built site (not the index or search pages)."""
    titles = {}
    for path in sorted(SITE.rglob("*.html")):
        rel = path.relative_to(SITE).as_posix()
        if rel.split("/")[0].startswith("_") or rel in NOT_IN_THE_BOOK or rel.startswith("jupyter_execute"):
            continue
        m = re.search(r"<h1[^>]*>(.*?)</h1>", path.read_text(encoding="utf-8", errors="replace"), re.DOTALL)
        if m:
            titles[rel] = _norm(html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).replace("#", ""))
    return titles


@pytest.fixture(scope="module")
def book() -> Any:
    if not PDF.is_file():
        pytest.fail(f"no PDF at {PDF}: run `make pdf` (after `make book`)")
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site at {SITE}: run `make book` first")
    from pypdf import PdfReader

    return PdfReader(str(PDF))


@pytest.fixture(scope="module")
def text(book: Any) -> list[str]:
    return [_norm(page.extract_text() or "") for page in book.pages]


@pytest.mark.browser
def test_every_page_of_the_site_is_in_the_pdf_in_reading_order(book: Any, text: list[str]) -> None:
    import pdf_book

    titles = site_titles()
    assert titles, f"{SITE} has no page with a title"
    order = [rel for rel, _ in pdf_book.site_pages(SITE)]
    assert sorted(order) == sorted(titles), f"pages the PDF would leave out: {sorted(set(titles) - set(order))}"
    marks = [(o.title, book.get_destination_page_number(o)) for o in book.outline]
    assert len(marks) == len(titles), f"{len(marks)} bookmarks for {len(titles)} pages"
    starts = [page for _, page in marks]
    assert starts == sorted(starts) and len(set(starts)) == len(starts) and starts[0] == 0, starts
    for (rel, (_, start)), end in zip(zip(order, marks), starts[1:] + [len(book.pages)]):
        body = "".join(text[start:end]).replace(" ", "")  # line breaks in the PDF's text fall anywhere
        assert titles[rel].replace(" ", "") in body, (
            f"{rel}: its title {titles[rel]!r} is not on its pages {start + 1}-{end} of the PDF")


@pytest.mark.browser
def test_page_count_fits_the_site(book: Any, text: list[str]) -> None:
    n_site = len(site_titles())
    assert n_site <= len(book.pages) <= 60 * n_site, f"{len(book.pages)} PDF pages for {n_site} site pages"
    blank = [i + 1 for i, t in enumerate(text) if not t.strip()]
    assert len(blank) <= len(book.pages) // 20, f"pages with no text at all: {blank[:20]}"


@pytest.mark.browser
def test_maths_is_typeset_and_nothing_was_left_loading(text: list[str]) -> None:
    everything = "\n".join(text)
    for raw in ("\\(", "\\[", "$$"):  # MathJax's delimiters in the prose (code cells write $...$)
        assert raw not in everything, f"raw TeX {raw!r} in the PDF: MathJax had not finished typesetting"
    assert "plotly.js is not loaded" not in everything


@pytest.mark.browser
def test_links_between_pages_stay_inside_the_pdf(book: Any) -> None:
    """A link from one page of the book to another jumps inside the PDF, never to the print server."""
    outside = []
    for i, page in enumerate(book.pages):
        for ref in page.get("/Annots", []) or []:
            action = ref.get_object().get("/A")
            uri = str(action.get_object().get("/URI", "")) if action is not None else ""
            if "127.0.0.1" in uri or "localhost" in uri:
                outside.append((i + 1, uri))
    assert not outside, f"links to the local print server: {outside[:5]}"


def test_pages_come_in_the_sidebars_reading_order(tmp_path: Path) -> None:
    import pdf_book

    (tmp_path / "book").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "index.html").write_text('<meta http-equiv="refresh" content="0; url=book/intro.html" />')
    nav = ('<nav class="bd-links bd-docs-nav" aria-label="Main"><a class="reference internal" href="#">Home</a>'
           '<a class="reference internal" href="../notebooks/02_b.html">2 <em>B</em></a>'
           '<a class="reference internal" href="../notebooks/01_a.html#part">1 A</a>'
           '<a class="reference internal" href="notation.html">Notation &amp; symbols</a></nav>')
    (tmp_path / "book" / "intro.html").write_text(f"<html><body>{nav}<h1>The book<a class='headerlink'>#</a></h1>")
    for rel in ("notebooks/01_a.html", "notebooks/02_b.html", "book/notation.html"):
        (tmp_path / rel).write_text("<h1>x</h1>")
    assert pdf_book.site_pages(tmp_path) == [("book/intro.html", "The book"), ("notebooks/02_b.html", "2 B"),
                                             ("notebooks/01_a.html", "1 A"), ("book/notation.html", "Notation & symbols")]
    (tmp_path / "index.html").unlink()
    with pytest.raises(pdf_book.PdfError, match="make book"):
        pdf_book.site_pages(tmp_path)
