"""HTML, Markdown and EDGAR full-submission (SGML) files read as documents, like a PDF's text layer.

- HTML (lxml): the visible text in reading order, one line per block element, a table row's cells on one line;
  scripts, styles and hidden elements (an inline-XBRL filing's `ix:header` sits in a `display:none` block) are
  left out. Pages are cut where the filing asks the printer for a new page (`page-break-before/after: always`),
  so a page number means what it means in the printed filing.
- Markdown (markdown-it, tables on): rendered to HTML, then read as HTML; raw HTML inside it is kept.
- EDGAR SGML (`<SEC-DOCUMENT>` / `<DOCUMENT>` blocks, the `.txt` full submission and `.htm` files fetched with
  their wrapper): a filing is one document, its primary document first and every other text document it contains
  (exhibits) after it, each starting on a new page headed by its type; uuencoded binaries (images, PDFs, zips)
  and XBRL data files are listed in the document's metadata as not read.

lxml's own `text_content()` has no notion of blocks or pages; the short walk below adds exactly those.
"""

from __future__ import annotations

import re
from dataclasses import replace

import lxml.html
from lxml import etree

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.identity import sha256_bytes
from pipeline.ingest.facts import FilingFact
from pipeline.ingest.inline_xbrl import read_facts
from pipeline.ingest.pdf import PdfDocument, clean_text, pdf_doc_error_id
from pipeline.ingest.pdf_text import join_pages
from pipeline.ingest.statement_tables import statement_facts
from pipeline.ingest.tabular import decode_candidates

HTML_SUFFIXES = (".htm", ".html", ".xhtml")
MARKDOWN_SUFFIXES = (".md", ".markdown")

_SKIP = {"script", "style", "head", "title", "noscript", "template"}
_BLOCKS = {"p", "div", "br", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "section",
           "article", "header", "footer", "blockquote", "pre", "dt", "dd", "dl", "center", "body", "caption",
           "thead", "tbody", "tfoot", "form", "fieldset", "address"}
_CELLS = {"td", "th"}
_PAGE = "\f"  # a page break among the walk's pieces
_SPACE = re.compile(r"[ \t\r\n\u00a0\u2002-\u200b\u3000]+")
_SGML_DOC = re.compile(rb"<DOCUMENT>(.*?)</DOCUMENT>", re.S | re.I)
_SGML_FIELD = re.compile(rb"<(TYPE|FILENAME|DESCRIPTION)>([^\r\n<]*)", re.I)
_SGML_TEXT = re.compile(rb"<TEXT>(.*?)(?:</TEXT>|\Z)", re.S | re.I)


def is_sgml_submission(head: bytes) -> bool:
    """An EDGAR submission: `<SEC-DOCUMENT>`, `<SEC-HEADER>` or `<DOCUMENT>` before anything else."""
    start = head.lstrip()[:64].upper()
    return start.startswith((b"<SEC-DOCUMENT>", b"<SEC-HEADER>", b"<DOCUMENT>", b"<IMS-DOCUMENT>"))


def _style(el: etree._Element) -> str:
    return (el.get("style") or "").replace(" ", "").lower()


class _Walk:
    """Visible text in reading order, with page breaks; marks each inline-XBRL fact with its raw page index."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.page = 0
        self.cells = 0  # depth of table cells around the element: a paragraph inside a cell does not end the row

    def _break(self) -> None:
        self.out.append(_PAGE)
        self.page += 1

    def visit(self, el: etree._Element) -> None:
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        style = _style(el)
        if isinstance(el.tag, str) and tag not in _SKIP and "display:none" not in style:
            block = tag in _BLOCKS
            sep = " " if self.cells and tag not in ("tr", "table") else "\n"
            if "page-break-before:always" in style:
                self._break()
            if tag == "ix:nonfraction":
                el.set("data-page", str(self.page))
            if block:
                self.out.append(sep)
            if el.text:
                self.out.append(_SPACE.sub(" ", el.text))  # a source newline is a space; lines come from blocks
            self.cells += tag in _CELLS
            for child in el:
                self.visit(child)
            self.cells -= tag in _CELLS
            if tag in _CELLS:
                self.out.append("\t")
            if block:
                self.out.append(sep)
            if "page-break-after:always" in style:
                self._break()
        if el.tail:
            self.out.append(_SPACE.sub(" ", el.tail))


def _lines(text: str) -> str:
    """Whitespace collapsed as a browser does; cells of a row separated by two spaces; no empty lines."""
    lines = []
    for raw in text.split("\n"):
        cells = [_SPACE.sub(" ", c).strip() for c in raw.split("\t")]
        line = "  ".join(c for c in cells if c)
        if line:
            lines.append(line)
    return "\n".join(lines)


def read_html(html: bytes | str) -> tuple[list[str], list[FilingFact]]:
    """The visible text of an HTML document page by page (see the module docstring; empty pages dropped), and its
    inline-XBRL facts with the page each is shown on."""
    if not html.strip():
        return [], []
    root = lxml.html.document_fromstring(html)
    walk = _Walk()
    walk.visit(root)
    raw = [_lines(p) for p in "".join(walk.out).split(_PAGE)]
    page_of: dict[int, int] = {}
    kept = 0
    for i, text in enumerate(raw):
        kept += bool(text)
        page_of[i] = max(kept, 1)
    return [p for p in raw if p], read_facts(root, page_of)


def html_pages(html: bytes | str) -> list[str]:
    return read_html(html)[0]


def markdown_pages(text: str) -> list[str]:
    # lazy: only Markdown inputs need the renderer
    from markdown_it import MarkdownIt

    return html_pages(MarkdownIt("commonmark").enable("table").render(text))


def _decode(data: bytes) -> str:
    """The most trustworthy decoding (BOM, UTF-8, then the Windows code pages): the delimited-log reader's."""
    return decode_candidates(data)[0][1]


def _text_pages(text: bytes) -> tuple[list[str], list[FilingFact]]:
    """A contained document's pages and inline-XBRL facts: HTML, or plain text whose pages are `<PAGE>` marks or
    form feeds."""
    if re.search(rb"<html|<body|<div|<p[ >]|<table", text[:4096], re.I):
        return read_html(text)
    plain = _decode(text)
    return [p for p in (_lines(page.replace("\t", " ")) for page in re.split(r"<PAGE>|\f", plain)) if p], []


def sgml_pages(data: bytes) -> tuple[list[str], list[FilingFact], list[str], str | None]:
    """(pages, inline-XBRL facts, parts not read, the primary document's type) of an EDGAR submission."""
    pages: list[str] = []
    facts: list[FilingFact] = []
    skipped: list[str] = []
    form = None
    for block in _SGML_DOC.findall(data):
        fields = {k.upper().decode(): v.strip().decode("latin-1") for k, v in _SGML_FIELD.findall(block[:2048])}
        kind, name = fields.get("TYPE", "?"), fields.get("FILENAME", "")
        body = _SGML_TEXT.search(block)
        text = body.group(1) if body else b""
        if text.lstrip()[:6].lower() == b"begin " or kind.upper() in ("GRAPHIC", "ZIP", "EXCEL", "PDF") \
                or re.match(rb"\s*<(XBRL|\?xml)", text, re.I):
            skipped.append(f"{kind} {name}".strip())
            continue
        doc_pages, doc_facts = _text_pages(text)
        if not doc_pages:
            skipped.append(f"{kind} {name} (no text)".strip())
            continue
        form = form or kind
        doc_pages[0] = f"[{kind} {name}]".replace(" ]", "]") + "\n" + doc_pages[0] if pages else doc_pages[0]
        facts.extend(replace(f, page=f.page + len(pages)) for f in doc_facts)
        pages.extend(doc_pages)
    return pages, facts, skipped, form


def read_markup_document(data: bytes, source_file: str, *, max_pages: int | None = None,
                         max_text_chars: int | None = None) -> PdfDocument | ErrorRecord:
    """One HTML, Markdown or EDGAR SGML file as a document (or its error row)."""
    doc_id = sha256_bytes(data)

    def fail(cls: str, msg: str) -> ErrorRecord:
        return ErrorRecord(row_id=pdf_doc_error_id(doc_id), unit=Unit.DOCUMENT, source_file=source_file,
                           stage=Stage.INGEST, error_class=cls, message=msg)

    skipped: list[str] = []
    facts: list[FilingFact] = []
    form = None
    try:
        if is_sgml_submission(data[:4096]):
            pages, facts, skipped, form = sgml_pages(data)
        elif source_file.lower().endswith(MARKDOWN_SUFFIXES):
            pages = markdown_pages(_decode(data))
        else:
            pages, facts = read_html(data)
    except (etree.ParserError, ValueError) as exc:
        return fail("InvalidMarkup", f"the file does not parse: {type(exc).__name__}: {exc}")
    pages = [clean_text(p) for p in pages]
    if not pages:
        return fail("NoText", "the file has no readable text" + (f" (not read: {', '.join(skipped)})" if skipped
                                                                  else ""))
    if max_pages is not None and len(pages) > max_pages:
        return fail("TooManyPages", f"{len(pages)} pages, over the limit of {max_pages} (max_pages; raise it with "
                    "--max-pages)")
    text = join_pages(pages)
    if max_text_chars is not None and len(text) > max_text_chars:
        return fail("TextTooLong", f"{len(text):,} characters of text, over the limit of {max_text_chars:,} "
                    "(max_text_chars; raise it with --max-text-chars)")
    return PdfDocument(doc_id=doc_id, source_file=source_file, page_count=len(pages), pages=pages, text=text,
                       needs_ocr=False, ocr_pages=[], encrypted=False, metadata={"title": form},
                       parts_not_read=skipped, facts=facts or statement_facts(pages))  # no tags: its tables
