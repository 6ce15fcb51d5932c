"""Markdown ⇄ Seed hypermedia blocks, as `@seed-hypermedia/client` (0.0.83) does it.

`parse_markdown` is a port of the library's `markdown-to-blocks` (`parseMarkdown`,
`parseInlineFormatting`, `flattenToOperations`): the library does not use a Markdown parser but
its own line tokenizer (indentation, list markers, `<!-- id:… -->` comments) and inline scanner,
so a CommonMark library would give other trees (docs/protocol.md, "Seed hypermedia"). Byte
exactness is proven against the library's own output (tests/hm_vectors, tests/protocol/test_hm_markdown.py).

`blocks_to_markdown` renders a document's block tree the way the library's `blocks-to-markdown`
does for the constructs a Markdown round trip keeps (headings, paragraphs, lists, code, math,
images, links and inline styles, tables).

Text offsets in annotations count UTF-16 code units, as JavaScript strings do. Block ids are
drawn by a caller-given `new_id` (eight characters of ID_CHARS), so this module has no clock and
no randomness of its own.
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
from typing import Callable

import yaml

__all__ = [
    "ID_CHARS",
    "random_block_id",
    "MarkdownTooComplex",
    "MAX_NESTING",
    "js_ordered",
    "parse_inline",
    "parse_frontmatter",
    "parse_markdown",
    "flatten_to_operations",
    "to_hm_nodes",
    "emit_frontmatter",
    "render_inline",
    "blocks_to_markdown",
    "slugify",
]

ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

NewId = Callable[[], str]


def random_block_id() -> str:
    """Eight random characters of ID_CHARS, as the library's `generateBlockId` (ID_CHARS is
    base64url's alphabet, so six random bytes in base64url are eight uniform characters)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(6)).decode("ascii")


# JavaScript's whitespace (String.prototype.trim and regex \s): Python's str.strip and re's \s
# differ (they include \x1c-\x1f and \x85, and leave out \ufeff).
_WS = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_S = "[" + re.escape(_WS) + "]"
_NS = "[^" + re.escape(_WS) + "]"
_DOT = "[^\n\r\u2028\u2029]"  # JavaScript's `.` (no s flag)


def _trim(s: str) -> str:
    return s.strip(_WS)


_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")


def js_ordered(d: dict) -> dict:
    """`d` in a JavaScript object's key order: keys that are array indexes ("0", "17") first,
    ascending, then the others as inserted. The library iterates objects (front matter, its
    block maps), so where that order reaches bytes (SetAttributes, DeleteBlocks) it is ours too."""
    index = [k for k in d if isinstance(k, str) and _INDEX_KEY.fullmatch(k) and int(k) < 4294967295]
    if not index:
        return d
    seen = set(index)
    return {**{k: d[k] for k in sorted(index, key=int)}, **{k: v for k, v in d.items() if k not in seen}}


def _u16(s: str) -> int:
    """JavaScript's `s.length`: UTF-16 code units."""
    if s.isascii():
        return len(s)
    n = len(s)
    for ch in s:
        if ord(ch) > 0xFFFF:
            n += 1
    return n


# ─── Inline formatting ───────────────────────────────────────────────────────

_SPAN_STYLE_TO_TYPE = {
    "color": "TextColor",
    "background-color": "BackgroundColor",
    "font-size": "TextSize",
    "font-family": "TextFamily",
}
_SPAN_TYPES = set(_SPAN_STYLE_TO_TYPE.values())
_BR_RE = re.compile(r"<br" + _S + r"*/?>")
_BR_AT_RE = re.compile(r"<br" + _S + r"*/?>")
_TAG_RE = re.compile(r"<(/?)(u|mark)>")
_SPAN_RE = re.compile(r'<span style="([a-z-]+):([^"]*)">')
_AUTOLINK_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:" + _NS + r"*")
_AUTOLINK_BAD_RE = re.compile(r"[" + re.escape(_WS) + r"<>]")


def _decode_html_attr(s: str) -> str:
    return s.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


class MarkdownTooComplex(ValueError):
    """The Markdown would cost too much to convert (the library's scans are quadratic on some
    inputs, e.g. thousands of unclosed `[`), or nests too deep."""


# The inline scanner's work bound: a base plus this many steps per character of the text. The
# library's rules rescan from every `[` and backtick run; on ordinary text that stays a few
# steps per character, and only pathological text (thousands of unclosed brackets) exceeds it.
_WORK_BASE = 1_000_000
_WORK_PER_CHAR = 32
# Deepest nesting of blocks (headings, lists, indentation) a Markdown document may have.
MAX_NESTING = 128


class _Work:
    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise MarkdownTooComplex("the text is too complex to convert (too many unclosed "
                                     "brackets or backtick runs, or overlapping styles, in one block)")


def _find_backtick_run(s: str, start: int, n: int, work: _Work | None = None) -> int:
    """The next run of exactly `n` backticks from `start`, or -1."""
    i = start
    found = -1
    while i < len(s):
        if s[i] == "`":
            k = 0
            while i + k < len(s) and s[i + k] == "`":
                k += 1
            if k == n:
                found = i
                break
            i += k
        else:
            i += 1
    if work is not None:
        work.spend(i - start)
    return found


def _read_link(s: str, open_at: int, work: _Work | None = None) -> tuple[str, str, int] | None:
    """`[label](url)` starting at `open_at`: (label, url, end) or None."""
    end, found = _scan_link(s, open_at, work)
    if work is not None:
        work.spend(end - open_at)
    return found


def _scan_link(s: str, open_at: int, work: _Work | None) -> tuple[int, tuple[str, str, int] | None]:
    """(how far the scan went, the link or None)."""
    depth = 0
    i = open_at
    close = -1
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            n = 0
            while i + n < len(s) and s[i + n] == "`":
                n += 1
            closer = _find_backtick_run(s, i + n, n, work)
            i = i + n if closer == -1 else closer + n
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                close = i
                break
        i += 1
    if close == -1 or s[close + 1:close + 2] != "(":
        return i, None
    label = s[open_at + 1:close]
    j = close + 2
    if s[j:j + 1] == "<":
        gt = s.find(">", j + 1)
        if gt == -1 or s[gt + 1:gt + 2] != ")":
            return (len(s) if gt == -1 else gt), None
        return gt, (label, s[j + 1:gt], gt + 2)
    parens = 0
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "(":
            parens += 1
        elif c == ")":
            if parens == 0:
                return j, (label, s[close + 2:j], j + 1)
            parens -= 1
        j += 1
    return j, None


def _sort_keys(value):
    if isinstance(value, list):
        return [_sort_keys(v) for v in value]
    if isinstance(value, dict):
        return {k: _sort_keys(value[k]) for k in sorted(value)}
    return value


def _annotation_key(a: dict) -> str:
    attrs = a.get("attributes")
    return a["type"] + "\0" + (a.get("link") or "") + "\0" + (
        json.dumps(_sort_keys(attrs), separators=(",", ":"), ensure_ascii=False) if attrs else "")


def _locale_key(s: str) -> tuple:
    # String.prototype.localeCompare on ASCII type names: case-insensitive first.
    return (s.lower(), s.swapcase())


def _merge_adjacent(annotations: list[dict]) -> list[dict]:
    by_key: dict[str, tuple[dict, list[list[int]]]] = {}
    for a in annotations:
        key = _annotation_key(a)
        entry = by_key.get(key)
        if entry is None:
            entry = (a, [])
            by_key[key] = entry
        for s, e in zip(a["starts"], a["ends"]):
            if e <= s:
                continue
            entry[1].append([s, e])
    out: list[dict] = []
    for proto, ranges in by_key.values():
        ranges.sort(key=lambda r: (r[0], r[1]))
        merged: list[list[int]] = []
        for r in ranges:
            if merged and r[0] <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], r[1])
            else:
                merged.append(list(r))
        for s, e in merged:
            ann: dict = {"type": proto["type"], "starts": [s], "ends": [e]}
            if "link" in proto:
                ann["link"] = proto["link"]
            if proto.get("attributes"):
                ann["attributes"] = proto["attributes"]
            out.append(ann)
    out.sort(key=lambda a: (a["starts"][0], -a["ends"][0], _locale_key(a["type"])))
    return out


def parse_inline(raw: str, _work: _Work | None = None) -> tuple[str, list[dict]]:
    """Inline Markdown → (plain text, annotations), as the library's `parseInlineFormatting`.
    MarkdownTooComplex past the work bound."""
    work = _work if _work is not None else _Work(_WORK_BASE + _WORK_PER_CHAR * len(raw))
    return _InlineParser(raw, work).run()


class _InlineParser:
    """One pass over inline Markdown. The text so far is `parts` (its UTF-16 length `length`, the
    unit annotations count in); `stack` holds the spans opened and not yet closed. Each reader
    below looks at the character at `i` and returns where its construct ends, or None when the
    character is plain text there."""

    def __init__(self, raw: str, work: _Work) -> None:
        self.raw = raw
        self.work = work
        self.annotations: list[dict] = []
        self.stack: list[dict] = []
        self.parts: list[str] = []
        self.length = 0  # UTF-16 length of "".join(parts)

    def run(self) -> tuple[str, list[dict]]:
        raw = self.raw
        readers = {"\\": self._escape, "`": self._code, "*": self._emphasis, "_": self._emphasis,
                   "~": self._strike, "<": self._angle, "!": self._image, "[": self._link}
        i = 0
        n_raw = len(raw)
        while i < n_raw:
            ch = raw[i]
            reader = readers.get(ch)
            after = reader(i) if reader is not None else None
            if after is None:
                self.add(ch)
                i += 1
            else:
                i = after
        while self.stack:
            self.close(self.stack.pop())
        return "".join(self.parts), _merge_adjacent(self.annotations)

    # ── the text and its spans ──

    def add(self, s: str) -> None:
        self.parts.append(s)
        self.length += _u16(s)

    def annotate(self, kind: str, start: int, link: str | None = None) -> None:
        ann: dict = {"type": kind, "starts": [start], "ends": [self.length]}
        if link is not None:
            ann["link"] = link
        self.annotations.append(ann)

    def close(self, span: dict) -> None:
        if self.length > span["start"]:
            ann = {"type": span["type"], "starts": [span["start"]], "ends": [self.length]}
            if "link" in span:
                ann["link"] = span["link"]
            if span.get("attributes"):
                ann["attributes"] = span["attributes"]
            self.annotations.append(ann)

    def close_at(self, idx: int) -> None:
        """Close the span at `idx`; the spans opened after it close and reopen around it."""
        stack = self.stack
        above = stack[idx + 1:]
        del stack[idx + 1:]
        for s in reversed(above):
            self.close(s)
        self.close(stack.pop())
        for s in above:
            stack.append({**s, "start": self.length})

    def toggle(self, kind: str, family: str) -> None:
        for idx in range(len(self.stack) - 1, -1, -1):
            if self.stack[idx]["type"] == kind and self.stack[idx]["family"] == family:
                self.close_at(idx)
                return
        self.stack.append({"type": kind, "start": self.length, "family": family})

    def close_type(self, pred) -> None:
        for idx in range(len(self.stack) - 1, -1, -1):
            if pred(self.stack[idx]):
                self.close_at(idx)
                return

    def append_parsed(self, text: str, anns: list[dict]) -> None:
        offset = self.length
        self.add(text)
        for ann in anns:
            self.annotations.append({**ann, "starts": [s + offset for s in ann["starts"]],
                                     "ends": [e + offset for e in ann["ends"]]})

    # ── the readers, one per construct ──

    def _escape(self, i: int) -> int | None:
        if i + 1 < len(self.raw):
            self.add(self.raw[i + 1])
            return i + 2
        return None

    def _code(self, i: int) -> int:
        raw = self.raw
        n = _run_length(raw, i, "`")
        closer = _find_backtick_run(raw, i + n, n, self.work)
        if closer == -1:  # no closing run: the backticks are text
            self.add(raw[i:i + n])
            return i + n
        inner = raw[i + n:closer]
        if len(inner) >= 2 and inner.startswith(" ") and inner.endswith(" ") and _trim(inner) != "":
            inner = inner[1:-1]
        inner = re.sub(r"<br" + _S + r"*/?>", "\n", inner)
        start = self.length
        self.add(inner)
        if inner:
            self.annotate("Code", start)
        return closer + n

    def _emphasis(self, i: int) -> int:
        ch = self.raw[i]
        n = _run_length(self.raw, i, ch)
        after = i + n
        while n > 0:  # a run of three is bold then italic, and so on
            if n >= 2:
                self.toggle("Bold", ch)
                n -= 2
            else:
                self.toggle("Italic", ch)
                n -= 1
        return after

    def _strike(self, i: int) -> int | None:
        if self.raw[i + 1:i + 2] != "~":
            return None
        self.toggle("Strike", "~")
        return i + 2

    def _angle(self, i: int) -> int | None:
        """`<br>`, `<u>`/`<range>` tags, styled `<span>`s and their close, or an autolink."""
        raw = self.raw
        br = _BR_AT_RE.match(raw, i)
        if br:
            self.add("\n")
            return br.end()
        tag = _TAG_RE.match(raw, i)
        if tag:
            kind = "Underline" if tag.group(2) == "u" else "Range"
            if tag.group(1):
                self.close_type(lambda s, kind=kind: s["type"] == kind)
            else:
                self.stack.append({"type": kind, "start": self.length, "family": "html"})
            return tag.end()
        span = _SPAN_RE.match(raw, i)
        if span and span.group(1) in _SPAN_STYLE_TO_TYPE:
            self.stack.append({"type": _SPAN_STYLE_TO_TYPE[span.group(1)], "start": self.length, "family": "html",
                               "attributes": {"value": _decode_html_attr(span.group(2))}})
            return span.end()
        if raw.startswith("</span>", i):
            self.close_type(lambda s: s["type"] in _SPAN_TYPES)
            return i + 7
        return self._autolink(i)

    def _autolink(self, i: int) -> int | None:
        end = self.raw.find(">", i + 1)
        if end == -1:
            return None
        inner = self.raw[i + 1:end]
        if not _AUTOLINK_RE.fullmatch(inner) or _AUTOLINK_BAD_RE.search(inner):
            return None
        start = self.length
        if inner.startswith("hm://"):
            self.add("\ufffc")
            self.annotate("Embed", start, inner)
        else:
            self.add(inner)
            self.annotate("Link", start, inner)
        return end + 1

    def _image(self, i: int) -> int | None:
        """`![alt](url)` inline: its alt text stays, the image does not."""
        if self.raw[i + 1:i + 2] != "[":
            return None
        link = _read_link(self.raw, i + 1, self.work)
        if not link:
            return None
        self.append_parsed(*parse_inline(link[0], self.work))
        return link[2]

    def _link(self, i: int) -> int | None:
        link = _read_link(self.raw, i, self.work)
        if not link:
            return None
        start = self.length
        self.append_parsed(*parse_inline(link[0], self.work))
        if self.length > start:
            self.annotate("Link", start, link[1])
        return link[2]


def _run_length(s: str, i: int, ch: str) -> int:
    """How many times `ch` repeats from `i`."""
    n = 0
    while i + n < len(s) and s[i + n] == ch:
        n += 1
    return n


# ─── Block comments and lines ────────────────────────────────────────────────

_COMMENT_BODY = r"<!--" + _S + r"*id:([A-Za-z0-9_-]+)(?:" + _S + r"+type:([A-Za-z0-9_-]+))?(?:" + _S + \
    r"+attrs:(\{" + _DOT + r"*\}))?" + _S + r"*-->"
_TRAILING_COMMENT_RE = re.compile(" ?" + _COMMENT_BODY + _S + r"*$")
_STANDALONE_COMMENT_RE = re.compile(r"^" + _S + r"*" + _COMMENT_BODY + _S + r"*$")
_END_RE = re.compile(r"^" + _S + r"*<!--" + _S + r"*end:([A-Za-z0-9_-]+)" + _S + r"*-->" + _S + r"*$")
_MARKER_RE = re.compile(r"^([-*+] |[0-9]+[.)] |> )")
_HEADING_RE = re.compile(r"^(#{1,6})" + _S + r"+(" + _DOT + r"*)$")
_FENCE_RE = re.compile(r"^(`{3,})(" + _DOT + r"*)$")
_CLOSING_FENCE_RE = re.compile(r"^(`{3,})" + _S + r"*$")
_COL_ID_RE = re.compile(r"<!--" + _S + r"*col:([A-Za-z0-9_-]+)(?:" + _S + r"+attrs:(\{" + _DOT + r"*?\}))?" + _S + r"*-->")
_CELL_ID_RE = re.compile(r"<!--" + _S + r"*id:([A-Za-z0-9_-]+)" + _S + r"*-->")
_SEPARATOR_CELL_RE = re.compile(r"^:?-+:?$")
_URL_SCHEME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_LINK_ONLY_RE = re.compile(r"^<([a-zA-Z][a-zA-Z0-9+.-]*:[^" + re.escape(_WS) + r"<>]*)>$")


def _search_js(pattern: re.Pattern, s: str):
    # JavaScript's `$` (no m flag) matches only at the very end; Python's also before a final
    # "\n". Lines never hold "\n", but be exact anyway.
    m = pattern.search(s)
    if m and m.end() != len(s) and pattern.pattern.endswith("$"):
        return None
    return m


def _comment_from_match(m: re.Match) -> dict:
    c: dict = {"id": m.group(1)}
    if m.group(2):
        c["type"] = m.group(2)
    if m.group(3):
        try:
            parsed = json.loads(m.group(3))
            if isinstance(parsed, dict):
                c["attrs"] = parsed
        except ValueError:
            pass
    return c


def _strip_block_comment(s: str) -> tuple[str, dict | None]:
    m = _search_js(_TRAILING_COMMENT_RE, s)
    if m:
        return s[:m.start()], _comment_from_match(m)
    return s, None


class _Line:
    __slots__ = ("raw", "indent", "marker", "marker_kind", "content_col", "rest", "blank")

    def __init__(self, raw: str) -> None:
        lead_len = len(raw) - len(raw.lstrip(" \t"))
        lead = raw[:lead_len]
        self.raw = raw
        self.indent = len(lead.replace("\t", "  "))
        rest = raw[lead_len:]
        self.blank = _trim(rest) == ""
        self.marker = ""
        self.marker_kind: str | None = None
        m = _MARKER_RE.match(rest)
        if m and not self.blank:
            self.marker = m.group(1)
            self.marker_kind = ("Blockquote" if self.marker == "> " else
                                "Ordered" if self.marker[0] in "0123456789" else "Unordered")
            rest = rest[len(self.marker):]
        self.content_col = self.indent + len(self.marker)
        self.rest = rest


def _node(block: dict, children: list | None = None) -> dict:
    return {"block": block, "children": children if children is not None else []}


class _Builder:
    def __init__(self, new_id: NewId) -> None:
        self.new_id = new_id

    def base(self, type_: str, comment: dict | None, text: str = "", annotations: list | None = None) -> dict:
        block = {"type": type_, "id": (comment or {}).get("id") or self.new_id(), "text": text,
                 "annotations": annotations if annotations is not None else []}
        if comment and comment.get("attrs"):
            block["attributes"] = dict(comment["attrs"])
        return block

    def paragraph(self, raw: str, comment: dict | None) -> dict:
        text, anns = parse_inline(raw)
        return _node(self.base("Paragraph", comment, text, anns))

    def heading(self, raw: str, comment: dict | None) -> dict:
        text, anns = parse_inline(raw)
        return _node(self.base("Heading", comment, text, anns))

    def code(self, text: str, language: str, comment: dict | None) -> dict:
        block = self.base("Code", comment, text)
        if language:
            block["language"] = language
        return _node(block)

    def math(self, text: str, comment: dict | None) -> dict:
        return _node(self.base("Math", comment, text))

    def image(self, alt: str, url: str, comment: dict | None) -> dict:
        text, anns = parse_inline(alt)
        block = self.base("Image", comment, text, anns)
        block["link"] = url
        return _node(block)

    def typed(self, visible: str, comment: dict) -> dict:
        block = self.base(comment["type"], comment)
        v = _trim(visible)
        link_only = _LINK_ONLY_RE.match(v)
        labeled = _read_link(v, 0) if v.startswith("[") else None
        if link_only:
            block["link"] = link_only.group(1)
        elif labeled and labeled[2] == len(v):
            block["text"], block["annotations"] = parse_inline(labeled[0])
            block["link"] = labeled[1]
        elif v:
            block["text"], block["annotations"] = parse_inline(v)
        return _node(block)

    # Tables: a Table whose children are TableColumn blocks then TableRow blocks of cells.
    def _split_row(self, line: str) -> tuple[list[dict], str | None]:
        text, comment = _strip_block_comment(_trim(line))
        row_id = comment["id"] if comment else None
        s = _trim(text)
        if s.startswith("|"):
            s = s[1:]
        raw_cells: list[str] = []
        cur = ""
        i = 0
        while i < len(s):
            if s[i] == "\\" and s[i + 1:i + 2] == "|":
                cur += "|"
                i += 1
            elif s[i] == "|":
                raw_cells.append(_trim(cur))
                cur = ""
            else:
                cur += s[i]
            i += 1
        last = _trim(cur)
        if last != "" or not raw_cells:
            raw_cells.append(last)
        cells = []
        for raw in raw_cells:
            cell_text = raw
            m = _CELL_ID_RE.search(cell_text)
            if m:
                row_id = m.group(1)
                cell_text = cell_text.replace(m.group(0), "", 1)
            col_id = None
            col_attrs = None
            m = _COL_ID_RE.search(cell_text)
            if m:
                col_id = m.group(1)
                if m.group(2):
                    try:
                        col_attrs = json.loads(m.group(2))
                    except ValueError:
                        col_attrs = None
                cell_text = cell_text.replace(m.group(0), "", 1)
            cells.append({"text": _trim(cell_text), "colId": col_id, "colAttrs": col_attrs})
        return cells, row_id

    @staticmethod
    def _is_separator(cells: list[dict]) -> bool:
        return bool(cells) and all(_SEPARATOR_CELL_RE.match(c["text"]) for c in cells)

    def _cell(self, raw: str, column_id: str) -> dict:
        text, anns = parse_inline(raw)
        return _node({"type": "Paragraph", "id": self.new_id(), "text": text, "annotations": anns,
                      "attributes": {"columnId": column_id}})

    def table(self, lines: list[str], comment: dict | None = None) -> dict:
        rows = [self._split_row(line) for line in lines]
        header = None
        if len(rows) >= 2 and self._is_separator(rows[1][0]):
            header = rows[0]
            body = [r for r in rows[2:] if not self._is_separator(r[0])]
        else:
            body = [r for r in rows if not self._is_separator(r[0])]
        header_cells = header[0] if header else []
        col_count = max([len(header_cells), *(len(r[0]) for r in body), 0])
        column_ids = []
        for idx in range(col_count):
            cid = header_cells[idx]["colId"] if idx < len(header_cells) else None
            column_ids.append(cid or self.new_id())
        columns = []
        for idx, cid in enumerate(column_ids):
            block = {"type": "TableColumn", "id": cid, "text": "", "annotations": []}
            attrs = header_cells[idx]["colAttrs"] if idx < len(header_cells) else None
            if isinstance(attrs, dict) and attrs:
                block["attributes"] = dict(attrs)
            columns.append(_node(block))
        row_nodes = []
        if header and any(c["text"] != "" for c in header_cells):
            cells = [self._cell(header_cells[idx]["text"] if idx < len(header_cells) else "", cid)
                     for idx, cid in enumerate(column_ids)]
            row_nodes.append(_node({"type": "TableRow", "id": header[1] or self.new_id(), "text": "",
                                    "annotations": [], "attributes": {"isHeader": True}}, cells))
        for cells_in, row_id in body:
            cells = [self._cell(cells_in[idx]["text"] if idx < len(cells_in) else "", cid)
                     for idx, cid in enumerate(column_ids)]
            row_nodes.append(_node({"type": "TableRow", "id": row_id or self.new_id(), "text": "",
                                    "annotations": []}, cells))
        return _node(self.base("Table", comment), columns + row_nodes)


# ─── Frontmatter ─────────────────────────────────────────────────────────────

_METADATA_STRING_KEYS = (
    "name", "summary", "displayAuthor", "displayPublishTime", "icon", "cover", "siteUrl", "layout",
    "seedExperimentalLogo", "importCategories", "importTags", "seedExperimentalHomeOrder",
    "contentWidth", "childrenType",
)
_METADATA_BOOLEAN_KEYS = ("showOutline", "showActivity")
_CLOSE_FM_RE = re.compile(r"\n---[ \t]*(?:\n|$)")


def _js_string(value) -> str:
    """JavaScript's String(value) for what YAML gives."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat") and not isinstance(value, str):
        return value.isoformat()[:10]
    return str(value)


def _js_truthy(value) -> bool:
    if isinstance(value, (list, dict)):
        return True  # JavaScript: every object is truthy, empty or not
    return bool(value)


class _YamlLoader(yaml.SafeLoader):
    """YAML 1.2's core schema, as the library's `yaml` package reads front matter: only
    true/false are booleans (yes/no/on/off stay strings), no timestamps (dates stay strings),
    decimal / 0o / 0x integers, plain floats and .inf/.nan."""


_CORE = {
    "tag:yaml.org,2002:bool": (r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    "tag:yaml.org,2002:int": (r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    "tag:yaml.org,2002:float": (r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$", "-+0123456789."),
}
_YamlLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag not in _CORE and tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, (_rx, _first) in _CORE.items():
    _YamlLoader.add_implicit_resolver(_tag, re.compile(_rx), list(_first))


def _core_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = loader.construct_scalar(node)
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


_YamlLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


def _plain(value, depth: int = 0):
    """A front matter value as DAG-CBOR can carry it: non-finite floats, huge integers and other
    YAML types become text, map keys strings (the library would fail to encode some of these)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else _js_string(value)
    if depth < 16 and isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    if depth < 16 and isinstance(value, dict):
        return {_js_string(k) if not isinstance(k, str) else k: _plain(v, depth + 1) for k, v in value.items()}
    return _js_string(value)


def parse_frontmatter(markdown: str) -> tuple[str, dict]:
    """(content, metadata): a leading `---` YAML block read into document metadata."""
    trimmed = markdown[1:] if markdown.startswith("\ufeff") else markdown
    if not trimmed.startswith("---"):
        return markdown, {}
    first_end = trimmed.find("\n")
    if first_end == -1 or _trim(trimmed[:first_end]) != "---":
        return markdown, {}
    close = _CLOSE_FM_RE.search(trimmed, first_end)
    if not close:
        return markdown, {}
    yaml_block = trimmed[first_end + 1:close.start()]
    rest = trimmed[close.end():]
    metadata: dict = {}
    try:
        parsed = {} if _trim(yaml_block) == "" else yaml.load(yaml_block, Loader=_YamlLoader)
        if isinstance(parsed, list):  # JavaScript's Object.entries of an array: its indexes
            parsed = {str(i): v for i, v in enumerate(parsed)}
        if not parsed or not isinstance(parsed, dict):
            return rest, metadata
        for key, value in parsed.items():
            if key == "title":
                continue
            metadata[key if isinstance(key, str) else _js_string(key)] = _plain(value)
        if "name" not in metadata and parsed.get("title") is not None:
            metadata["name"] = _js_string(parsed["title"])
        for key in _METADATA_STRING_KEYS:  # null becomes undefined there: the key goes
            if key in metadata and not isinstance(metadata[key], str):
                if metadata[key] is None:
                    del metadata[key]
                else:
                    metadata[key] = _js_string(metadata[key])
        for key in _METADATA_BOOLEAN_KEYS:  # Boolean(null) is false
            if key in metadata and not isinstance(metadata[key], bool):
                metadata[key] = _js_truthy(metadata[key])
    except (yaml.YAMLError, ValueError, RecursionError):
        return markdown, {}
    return rest, js_ordered(metadata)


# ─── Block tree ──────────────────────────────────────────────────────────────

def _is_list_type(t) -> bool:
    return t in ("Unordered", "Ordered", "Blockquote")


def _starts_special(rest: str) -> bool:
    return bool(_HEADING_RE.match(rest) or _FENCE_RE.match(rest) or rest.startswith("$$")
                or rest.startswith("![") or rest.startswith("|")
                or _search_js(_STANDALONE_COMMENT_RE, rest) or _search_js(_END_RE, rest))


def _strip_indent(line: str, n: int) -> str:
    k = 0
    while k < n and k < len(line) and line[k] == " ":
        k += 1
    return line[k:]


def parse_markdown(markdown: str, new_id: NewId = random_block_id) -> tuple[list[dict], dict]:
    """Markdown → (block tree, metadata), as the library's `parseMarkdown`.

    A node is `{"block": {...}, "children": [...]}`; a block has `type`, `id`, `text`,
    `annotations` and, when set, `attributes`, `childrenType`, `language`, `link`.
    """
    content, metadata = parse_frontmatter(markdown)
    tree = _TreeParser([_Line(line) for line in content.split("\n")], new_id).run()
    _finalize_groups(tree)
    return tree, metadata


class _TreeParser:
    """The lines of a document into a block tree. `stack` is the path from the root to where the
    next block goes: each frame holds the list its blocks join (`list`), the indent its children
    have (`childIndent`), and what opened it: a heading (`headingLevel`), a run of list markers
    (`shorthand`: the marker kind), or a block with indented children."""

    def __init__(self, infos: list[_Line], new_id: NewId) -> None:
        self.infos = infos
        self.new_id = new_id
        self.b = _Builder(new_id)
        self.root: dict = {"list": [], "childIndent": 0}
        self.stack: list[dict] = [self.root]

    def run(self) -> list[dict]:
        infos = self.infos
        i = 0
        while i < len(infos):
            info = infos[i]
            if info.blank:
                i += 1
                continue
            end = _search_js(_END_RE, info.rest)
            if end and not info.marker:
                self.close_block(end.group(1))
                i += 1
                continue
            heading_m = _HEADING_RE.match(info.rest)
            self.adjust(info, len(heading_m.group(1)) if heading_m else None)
            frame = self.stack[-1]
            if not info.marker_kind:
                self.group_heading_list(frame)
            if info.marker_kind and not frame.get("shorthand") and self.implicit_list_start(frame, info.marker_kind):
                frame = self.open_list(frame, info.marker_kind, info.indent)
            if len(self.stack) > MAX_NESTING:
                raise MarkdownTooComplex(f"the Markdown nests blocks more than {MAX_NESTING} levels deep")
            node, i, standalone = self.parse_block_at(i)
            frame["list"].append(node)
            frame["markerRun"] = info.marker_kind
            if info.marker_kind and frame.get("node") and not frame["node"]["block"].get("childrenType"):
                frame["node"]["block"]["childrenType"] = info.marker_kind
            self.stack.append(self.frame_under(node, info, heading_m, standalone, i))
        return self.root["list"]

    # ── where the next block goes ──

    def close_block(self, target: str) -> None:
        """`<!-- end:ID -->`: the children of block ID end here."""
        stack = self.stack
        for idx in range(len(stack) - 1, -1, -1):
            node = stack[idx].get("node")
            if node and node["block"]["id"] == target:
                if idx > 0:
                    del stack[idx:]
                break

    def adjust(self, info: _Line, heading_level: int | None) -> None:
        """Leave the frames this line is not inside: less indented, another marker kind at a
        list's indent, or a heading of the same or a higher level."""
        stack = self.stack
        while len(stack) > 1:
            frame = stack[-1]
            if info.indent < frame["childIndent"]:
                stack.pop()
                continue
            if info.indent == frame["childIndent"]:
                if frame.get("shorthand"):
                    if info.marker_kind == frame["shorthand"]:
                        break
                    stack.pop()
                    continue
                if (frame.get("headingLevel") is not None and heading_level is not None
                        and heading_level <= frame["headingLevel"]):
                    stack.pop()
                    continue
                break
            break

    def group_heading_list(self, frame: dict) -> None:
        """A line without a marker under a heading whose children so far are a list: the list
        moves into an empty container paragraph and the heading's children become a group."""
        fnode = frame.get("node")
        if (not frame.get("shorthand") and fnode and fnode["block"]["type"] == "Heading"
                and frame["list"] and _is_list_type(fnode["block"].get("childrenType"))):
            container = _node({"type": "Paragraph", "id": self.new_id(), "text": "", "annotations": [],
                               "childrenType": fnode["block"]["childrenType"]}, frame["list"][:])
            frame["list"].clear()
            frame["list"].append(container)
            fnode["block"]["childrenType"] = "Group"
            frame["markerRun"] = None

    def implicit_list_start(self, frame: dict, kind: str) -> bool:
        if not frame.get("node"):
            return True
        parent_type = frame["node"]["block"].get("childrenType")
        if parent_type and parent_type != kind:
            return True
        return len(frame["list"]) > 0 and frame.get("markerRun") != kind

    def open_list(self, frame: dict, kind: str, indent: int) -> dict:
        """A list starts without a parent block: it nests under the paragraph just before it when
        that one can hold it, else under a new empty paragraph. Returns the list's frame."""
        stack = self.stack
        prev = frame["list"][-1] if frame["list"] else None
        can_nest = (prev is not None and prev["block"]["type"] == "Paragraph" and prev["block"]["text"] != ""
                    and not prev["children"] and not prev["block"].get("childrenType"))
        if can_nest:
            target = prev
        else:
            target = _node({"type": "Paragraph", "id": self.new_id(), "text": "", "annotations": []})
            frame["list"].append(target)
            frame["markerRun"] = None
        target["block"]["childrenType"] = kind
        if len(stack) > 1 and stack[-1].get("node") is target:
            stack.pop()
        stack.append({"node": target, "list": target["children"], "childIndent": indent, "shorthand": kind})
        return stack[-1]

    def frame_under(self, node: dict, info: _Line, heading_m, standalone: bool, after: int) -> dict:
        """The frame a block's children go into: under a heading, what follows until a heading
        of its level; under a lone block comment, a list at its indent or what is indented more;
        otherwise what is indented past its marker (or by two)."""
        if heading_m:
            return {"node": node, "list": node["children"], "childIndent": info.content_col,
                    "headingLevel": len(heading_m.group(1))}
        if standalone and not info.marker:
            following = self.next_non_blank(after)
            if following and following.indent == info.indent and following.marker_kind:
                return {"node": node, "list": node["children"], "childIndent": info.indent,
                        "shorthand": following.marker_kind}
            return {"node": node, "list": node["children"], "childIndent": info.indent + 2}
        return {"node": node, "list": node["children"],
                "childIndent": info.content_col if info.marker else info.indent + 2}

    def next_non_blank(self, start: int) -> _Line | None:
        for j in range(start, len(self.infos)):
            if not self.infos[j].blank:
                return self.infos[j]
        return None

    # ── one block: (its node, the line after it, whether it was a lone block comment) ──

    def parse_block_at(self, start: int) -> tuple[dict, int, bool]:
        info = self.infos[start]
        rest = info.rest
        standalone = _search_js(_STANDALONE_COMMENT_RE, rest)
        if standalone:
            return self.commented_block(start, _comment_from_match(standalone))
        fence = _FENCE_RE.match(rest)
        if fence:
            return self.code_block(start, fence)
        if rest.startswith("$$"):
            return self.math_block(start)
        heading = _HEADING_RE.match(rest)
        if heading:
            text, comment = _strip_block_comment(heading.group(2))
            if comment and comment.get("type"):
                return self.b.typed(text, comment), start + 1, False
            return self.b.heading(text, comment), start + 1, False
        if rest.startswith("|"):
            lines, j = self.table_lines(start)
            return self.b.table(lines), j, False
        visible, comment = _strip_block_comment(rest)
        if comment and comment.get("type"):
            return self.b.typed(visible, comment), start + 1, False
        if visible.startswith("!["):
            image = self.image_block(visible, comment)
            if image is not None:
                return image, start + 1, False
        return self.paragraph(start, visible, comment)

    def commented_block(self, start: int, comment: dict) -> tuple[dict, int, bool]:
        """A line holding only a block comment: the table under it takes its id, else it is a
        block of its own (of the comment's type)."""
        info = self.infos[start]
        following = self.next_non_blank(start + 1)
        if (following and following.indent >= info.indent and following.rest.startswith("|")
                and not following.marker):
            lines, j = self.table_lines(start + 1)
            return self.b.table(lines, comment), j, False
        return _node(self.b.base(comment.get("type") or "Paragraph", comment)), start + 1, True

    def table_lines(self, start: int) -> tuple[list[str], int]:
        """The `|` lines from `start`, and the line after them."""
        infos = self.infos
        lines = []
        j = start
        while j < len(infos) and infos[j].rest.startswith("|") and not infos[j].blank:
            lines.append(infos[j].rest)
            j += 1
        return lines, j

    def code_block(self, start: int, fence: re.Match) -> tuple[dict, int, bool]:
        """A fenced block up to a closing fence at least as long, at most as indented."""
        info = self.infos[start]
        fence_len = len(fence.group(1))
        language, comment = _strip_block_comment(_trim(fence.group(2)))
        body = []
        j = start + 1
        while j < len(self.infos):
            line = self.infos[j]
            closing = _CLOSING_FENCE_RE.match(_trim(line.raw))
            if closing and len(closing.group(1)) >= fence_len and line.indent <= info.content_col:
                break
            body.append(_strip_indent(line.raw, info.content_col))
            j += 1
        return self.b.code("\n".join(body), _trim(language), comment), j + 1, False

    def math_block(self, start: int) -> tuple[dict, int, bool]:
        """`$$` … `$$`."""
        info = self.infos[start]
        _, comment = _strip_block_comment(_trim(info.rest[2:]))
        body = []
        j = start + 1
        while j < len(self.infos) and _trim(self.infos[j].raw) != "$$":
            body.append(_strip_indent(self.infos[j].raw, info.content_col))
            j += 1
        return self.b.math("\n".join(body), comment), j + 1, False

    def image_block(self, visible: str, comment: dict | None) -> dict | None:
        """A line that is one image and nothing else; a path without a scheme is a file."""
        link = _read_link(visible, 1)
        if not link or _trim(visible[link[2]:]) != "":
            return None
        url = link[1]
        if url and not _URL_SCHEME_RE.match(url):
            url = "file://" + url
        return self.b.image(link[0], url, comment)

    def paragraph(self, start: int, text: str, comment: dict | None) -> tuple[dict, int, bool]:
        """A paragraph; without a block comment it goes on over the lines that continue it."""
        info = self.infos[start]
        j = start + 1
        if not comment:
            while j < len(self.infos):
                line = self.infos[j]
                if line.blank or line.marker or line.indent != info.content_col or _starts_special(line.rest):
                    break
                more, c = _strip_block_comment(line.rest)
                if c:
                    break
                text += " " + more
                j += 1
        return self.b.paragraph(text, comment), j, False


def _finalize_groups(nodes: list[dict]) -> None:
    """A block with children but no children type holds a group (tables keep their rows)."""
    for n in nodes:
        blk = n["block"]
        if n["children"] and not blk.get("childrenType") and blk["type"] not in ("Table", "TableRow"):
            blk["childrenType"] = "Group"
        _finalize_groups(n["children"])


def flatten_to_operations(tree: list[dict], parent_id: str = "") -> list[dict]:
    """A block tree as document operations: ReplaceBlock per block, then MoveBlocks per level."""
    ops: list[dict] = []
    ids: list[str] = []
    for node in tree:
        blk = node["block"]
        block = {**blk.get("attributes", {}), "type": blk["type"], "id": blk["id"], "text": blk["text"],
                 "annotations": blk["annotations"]}
        for key in ("language", "childrenType", "link"):
            if blk.get(key) is not None:
                block[key] = blk[key]
        ops.append({"type": "ReplaceBlock", "block": block})
        ids.append(blk["id"])
        if node["children"]:
            ops.extend(flatten_to_operations(node["children"], blk["id"]))
    if ids:
        ops.append({"type": "MoveBlocks", "blocks": ids, "parent": parent_id})
    return ops


def hm_nodes_to_operations(nodes: list[dict], parent_id: str = "") -> list[dict]:
    """API block nodes as document operations, as the reference server's
    `hmBlockNodesToOperations` (a draft's blocks, published): each block whole (its `attributes`
    nested) in a ReplaceBlock, then MoveBlocks per level."""
    ops: list[dict] = []
    ids: list[str] = []
    for node in nodes:
        ops.append({"type": "ReplaceBlock", "block": node["block"]})
        ids.append(node["block"]["id"])
        if node.get("children"):
            ops.extend(hm_nodes_to_operations(node["children"], node["block"]["id"]))
    if ids:
        ops.append({"type": "MoveBlocks", "blocks": ids, "parent": parent_id})
    return ops


def to_hm_nodes(tree: list[dict]) -> list[dict]:
    """Parser nodes → the API's block nodes (`markdownBlockNodesToHMBlockNodes`): childrenType and
    language move under `attributes`, `children` only when there are some."""
    out = []
    for node in tree:
        blk = node["block"]
        attributes = dict(blk.get("attributes") or {})
        if blk.get("childrenType") is not None:
            attributes["childrenType"] = blk["childrenType"]
        if blk.get("language") is not None:
            attributes["language"] = blk["language"]
        annotations = []
        for a in blk["annotations"]:
            ann = {"type": a["type"], "starts": a["starts"], "ends": a["ends"]}
            if "link" in a:
                ann["link"] = a["link"]
            if "attributes" in a:
                ann["attributes"] = a["attributes"]
            annotations.append(ann)
        hm_block = {"type": blk["type"], "id": blk["id"], "text": blk["text"], "annotations": annotations,
                    "attributes": attributes}
        if blk.get("link") is not None:
            hm_block["link"] = blk["link"]
        hm_node: dict = {"block": hm_block}
        if node["children"]:
            hm_node["children"] = to_hm_nodes(node["children"])
        out.append(hm_node)
    return out


# ─── Blocks → Markdown (the library's blocksToMarkdown) ──────────────────────

_FM_KEY_ORDER = (
    "name", "summary", "icon", "cover", "displayAuthor", "displayPublishTime", "schema", "childrenSchema",
    "schemaDefinition", "siteUrl", "layout", "theme", "contentWidth", "childrenType", "showOutline",
    "showActivity", "seedExperimentalLogo", "seedExperimentalHomeOrder", "importCategories", "importTags",
)
_PLAIN_FIRST = set("-?:,[]{}#&*!|>'\"%@`")
_YAML_INDICATOR_RE = re.compile(r": |:$| #|^[\s]|[\s]$")


def _rank(key: str) -> int:
    return _FM_KEY_ORDER.index(key) if key in _FM_KEY_ORDER else len(_FM_KEY_ORDER)


def _yaml_string(s: str, indent: str) -> str:
    if "\n" in s:
        chomp = "-" if not s.endswith("\n") else ("+" if s.endswith("\n\n") else "")
        body = s[:-1] if s.endswith("\n") and chomp == "" else s
        lines = body.split("\n")
        return "|" + chomp + "".join("\n" + (indent + "  " + line if line else "") for line in lines)
    plain = bool(s) and s[0] not in _PLAIN_FIRST and not _YAML_INDICATOR_RE.search(s)
    if plain:
        try:
            plain = yaml.load(s, Loader=_YamlLoader) == s
        except yaml.YAMLError:
            plain = False
    if plain:
        return s
    if '"' in s and "'" not in s:
        return "'" + s + "'"
    return json.dumps(s, ensure_ascii=False)


def _yaml_value(value, indent: str) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return _js_string(value)
    if isinstance(value, str):
        return _yaml_string(value, indent)
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "".join(f"\n{indent}  {_yaml_string(str(k), '')}: {_yaml_value(v, indent + '  ')}".rstrip(" ")
                       for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "[]"
        return "".join(f"\n{indent}  - {_yaml_value(v, indent + '    ')}" for v in value)
    return _yaml_string(str(value), indent)


def emit_frontmatter(metadata: dict) -> str:
    """`emitFrontmatter`: `---` YAML `---`, keys in the library's order."""
    entries = list((metadata or {}).items())  # null is written (`key: null`); absent keys are not
    if not entries:
        return "---\n---\n"
    entries.sort(key=lambda kv: (_rank(kv[0]), _locale_key(kv[0])))
    body = "\n".join(f"{_yaml_string(k, '')}: {_yaml_value(v, '')}".replace(": \n", ":\n") for k, v in entries)
    return "---\n" + body + "\n---\n"


def _comment_json(value) -> str:
    return json.dumps(_sort_keys(value), separators=(",", ":"), ensure_ascii=False).replace("--", "-\\u002d")


def _block_comment(block_id: str, type_: str | None = None, attrs: dict | None = None) -> str:
    s = f"<!-- id:{block_id}"
    if type_:
        s += f" type:{type_}"
    if attrs:
        s += f" attrs:{_comment_json(attrs)}"
    return s + " -->"


_NATIVE_TYPES = {"Paragraph", "Heading", "Code", "Math", "Image", "Table"}
_LIST_TYPES = {"Unordered", "Ordered", "Blockquote"}


def _is_native_attribute(type_: str, key: str, value, has_children: bool) -> bool:
    if key == "childrenType":
        if value in _LIST_TYPES:
            return True
        if value == "Group":
            return has_children
        return False
    return type_ == "Code" and key == "language"


def _extra_attributes(type_: str, attributes: dict, has_children: bool) -> dict:
    return {k: v for k, v in attributes.items()
            if v is not None and not _is_native_attribute(type_, k, v, has_children)}


def _render_url(url: str) -> str:
    return f"<{url}>" if re.search(r"[" + re.escape(_WS) + r"()<>]", url) else url


def _u16_slice(s: str, start: int, end: int | None = None) -> str:
    units = s.encode("utf-16-le", "surrogatepass")
    piece = units[start * 2:] if end is None else units[start * 2:end * 2]
    return piece.decode("utf-16-le", "surrogatepass")


def _escape_inline(s: str, at_line_start: bool) -> str:
    out = re.sub(r"[\\`*_~\[\]<]", lambda m: "\\" + m.group(0), s).replace("\n", "<br>")
    if at_line_start:
        out = re.sub(r"^(#|[-+>|$]|[0-9]+[.)])",
                     lambda m: "\\" + m.group(0) if len(m.group(0)) == 1 else m.group(0)[:-1] + "\\" + m.group(0)[-1],
                     out, count=1)
        if out and out[0] in _WS:
            out = "\\" + out
    return out


def _escape_trailing_whitespace(s: str) -> str:
    return s[:-1] + "\\" + s[-1] if s and s[-1] in _WS else s


def _spans(text: str, annotations: list | None) -> list[dict]:
    spans = []
    length = _u16(text)
    for a in annotations or []:
        starts = a.get("starts") or []
        ends = a.get("ends") or []
        link = a.get("link") or None
        attrs = a.get("attributes") or None
        key = a["type"] + " " + (link or "") + " " + (_comment_json(attrs) if attrs else "")
        for i, s in enumerate(starts):
            start = max(0, s)
            end = min(length, ends[i] if i < len(ends) else -1)
            if end <= start:
                continue
            spans.append({"start": start, "end": end, "type": a["type"], "link": link, "attributes": attrs,
                          "key": key})
    spans.sort(key=lambda x: (_locale_key(x["key"]), x["start"], x["end"]))
    merged: list[dict] = []
    for s in spans:
        if merged and merged[-1]["key"] == s["key"] and s["start"] <= merged[-1]["end"]:
            merged[-1]["end"] = max(merged[-1]["end"], s["end"])
        else:
            merged.append(dict(s))
    return merged


def _priority(s: dict) -> int:
    return 2 if s["type"] == "Embed" else 1 if s["type"] == "Code" else 0


def _opening_key(s: dict) -> tuple:
    return (_priority(s), -s["end"], s["start"], _locale_key(s["type"]))


_SPAN_STYLE = {v: k for k, v in _SPAN_STYLE_TO_TYPE.items()}


def _markers(s: dict, chunk: str, full_text: str) -> tuple[str, str]:
    t = s["type"]
    if t == "Bold":
        return "**", "**"
    if t == "Italic":
        return "_", "_"
    if t == "Strike":
        return "~~", "~~"
    if t == "Underline":
        return "<u>", "</u>"
    if t == "Range":
        return "<mark>", "</mark>"
    if t == "Link":
        return "[", f"]({_render_url(s['link'] or '')})"
    if t == "Embed":
        return f"<{s['link'] or ''}>", ""
    if t == "Code":
        fence_len = 1
        for m in re.finditer(r"`+", _u16_slice(full_text, s["start"], s["end"])):
            fence_len = max(fence_len, len(m.group(0)) + 1)
        fence = "`" * fence_len
        pad = " " if chunk and (chunk[0] in "` " or chunk[-1] in "` ") else ""
        return fence + pad, pad + fence
    prop = _SPAN_STYLE.get(t)
    if prop:
        value = str((s.get("attributes") or {}).get("value", ""))
        value = value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
        return f'<span style="{prop}:{value}">', "</span>"
    return "", ""


def render_inline(text: str, annotations: list | None, at_line_start: bool) -> str:
    """Text and annotations → inline Markdown (the library's renderInline)."""
    spans = _spans(text, annotations)
    if not spans:
        return _escape_trailing_whitespace(_escape_inline(text, at_line_start))
    points = sorted({0, _u16(text), *(s["start"] for s in spans), *(s["end"] for s in spans)})
    # A sweep instead of the library's filter over every span per segment (same spans, same
    # order): a span is active over [start, end), and every start and end is a point.
    starting: dict[int, list[int]] = {}
    ending: dict[int, list[int]] = {}
    for idx, span in enumerate(spans):
        starting.setdefault(span["start"], []).append(idx)
        ending.setdefault(span["end"], []).append(idx)
    live: set[int] = set()
    stack: list[tuple[dict, str]] = []
    out = ""
    work = _Work(_WORK_BASE + _WORK_PER_CHAR * len(text))  # overlapping spans cost per segment
    for p in range(len(points) - 1):
        pos, nxt = points[p], points[p + 1]
        live.difference_update(ending.get(pos, ()))
        live.update(starting.get(pos, ()))
        work.spend(len(live) + len(stack))
        active = [spans[idx] for idx in sorted(live)]
        active_ids = {id(a) for a in active}

        def is_active(span: dict) -> bool:
            return id(span) in active_ids   # noqa: B023 (used only in this iteration)

        survivors: list[dict] = []
        first_inactive = next((i for i, (span, _) in enumerate(stack) if not is_active(span)), len(stack))
        while len(stack) > first_inactive:
            span, close = stack.pop()
            out += close
            if is_active(span):
                survivors.insert(0, span)
        in_stack = {id(o) for o, _ in stack} | {id(v) for v in survivors}
        opening = survivors + [s for s in active if id(s) not in in_stack]
        opening.sort(key=_opening_key)
        inner = [entry for entry in stack if _priority(entry[0]) > 0]
        if opening and inner:
            for entry in reversed(inner):
                out += entry[1]
                stack.remove(entry)
                opening.append(entry[0])
            opening.sort(key=_opening_key)
        chunk = _u16_slice(text, pos, nxt)
        for s in opening:
            open_, close = _markers(s, chunk, text)
            out += open_
            stack.append((s, close))
        top = stack[-1][0] if stack else None
        if top is not None and top["type"] == "Embed":
            pass
        elif top is not None and top["type"] == "Code":
            out += chunk.replace("\n", "<br>")
        else:
            out += _escape_inline(chunk, at_line_start and out == "")
    while stack:
        out += stack.pop()[1]
    return _escape_trailing_whitespace(out)


def _table_markdown(node: dict, ind: str) -> str:
    columns: list[dict] = []
    rows: list[dict] = []
    for child in node.get("children") or []:
        block = child.get("block") or {}
        if block.get("type") == "TableColumn":
            attrs = _extra_attributes("TableColumn", block.get("attributes") or {}, False)
            columns.append({"id": block["id"], "attributes": attrs})
        elif block.get("type") == "TableRow":
            cells: dict[str, dict] = {}
            for cell_node in child.get("children") or []:
                cell = cell_node.get("block") or {}
                column_id = (cell.get("attributes") or {}).get("columnId")
                if isinstance(column_id, str) and column_id and column_id not in cells:
                    cells[column_id] = {"text": cell.get("text") or "", "annotations": cell.get("annotations")}
            rows.append({"id": block["id"], "cells": cells,
                         "isHeader": not rows and (block.get("attributes") or {}).get("isHeader") is True})
    if not columns:
        return ""

    def row_cells(row: dict | None) -> list[str]:
        out = []
        for col in columns:
            cell = row["cells"].get(col["id"]) if row else None
            text = render_inline(cell["text"], cell["annotations"], False) if cell else ""
            out.append(text.replace("|", "\\|").replace("\n", "<br>"))
        return out

    header = rows[0] if rows and rows[0]["isHeader"] else None
    body = rows[1:] if header else rows
    header_texts = row_cells(header)
    header_cells = []
    for idx, col in enumerate(columns):
        attrs = f" attrs:{_comment_json(col['attributes'])}" if col["attributes"] else ""
        text = header_texts[idx]
        header_cells.append((text + " " if text else "") + f"<!-- col:{col['id']}{attrs} -->")
    if header:
        header_cells[-1] += " " + _block_comment(header["id"])
    lines = [ind + "| " + " | ".join(header_cells) + " |", ind + "|" + "|".join(" --- " for _ in columns) + "|"]
    for row in body:
        cells = row_cells(row)
        cells[-1] = (cells[-1] + " " if cells[-1] else "") + _block_comment(row["id"])
        lines.append(ind + "| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _media_url(url: str, gateway: bool) -> str:
    return f"https://ipfs.io/ipfs/{url[7:]}" if gateway and url.startswith("ipfs://") else url


def _marker_for(children_type: str | None, index: int) -> str:
    if children_type == "Unordered":
        return "- "
    if children_type == "Ordered":
        return f"{index + 1}. "
    if children_type == "Blockquote":
        return "> "
    return ""


def _render_nodes(nodes: list[dict], ind: str, children_type: str | None, depth: int, gateway: bool,
                  out: list[str]) -> None:
    listy = children_type in _LIST_TYPES
    for i, node in enumerate(nodes):
        if i > 0 and not listy:
            out.append("")
        wrote_heading = _render_node(node, ind, _marker_for(children_type, i), depth, gateway, out)
        nxt = nodes[i + 1] if i + 1 < len(nodes) else None
        if wrote_heading and nxt is not None and nxt["block"]["type"] != "Heading":
            out.append(ind + f"<!-- end:{node['block']['id']} -->")


def _render_node(node: dict, ind: str, marker: str, depth: int, gateway: bool, out: list[str]) -> bool:
    block = node["block"]
    children = node.get("children") or []
    type_ = block["type"]
    text = block.get("text") or ""
    link = block.get("link") or ""
    attributes = block.get("attributes") or {}
    children_type = attributes.get("childrenType")
    if type_ == "Table":
        extra = _extra_attributes(type_, attributes, False)
        table = _table_markdown(node, ind + " " * len(marker))
        out.append(ind + marker + _block_comment(block["id"], None if table else "Table", extra))
        if table:
            out.extend(table.split("\n"))
        return False
    extra = _extra_attributes(type_, attributes, bool(children))
    comment = _block_comment(block["id"], None if type_ in _NATIVE_TYPES else type_, extra)
    content_ind = ind + " " * len(marker)
    wrote_heading = False
    child_ind = content_ind if marker else ind + "  "
    child_depth = 0
    shorthand = False
    if type_ == "Paragraph":
        if not text and children and children_type in _LIST_TYPES and not marker:
            out.append(ind + comment)
            shorthand = True
            child_ind = ind
        elif not text:
            out.append(ind + marker + comment)
        else:
            out.append(ind + marker + render_inline(text, block.get("annotations"), True) + " " + comment)
    elif type_ == "Heading":
        level = min(depth + 1, 6)
        out.append(ind + marker + "#" * level + " " + render_inline(text, block.get("annotations"), False)
                   + " " + comment)
        if level < 6:
            wrote_heading = not marker
            child_ind = content_ind
            child_depth = depth + 1
        else:
            child_ind = content_ind + "  "
        if children:
            out.append("")
    elif type_ == "Code":
        lang = attributes.get("language") or ""
        fence_len = 3
        for m in re.finditer(r"`+", text):
            fence_len = max(fence_len, len(m.group(0)) + 1)
        fence = "`" * fence_len
        out.append(ind + marker + fence + lang + " " + comment)
        out.extend(content_ind + line if line else "" for line in text.split("\n"))
        out.append(content_ind + fence)
    elif type_ == "Math":
        out.append(ind + marker + "$$ " + comment)
        out.extend(content_ind + line if line else "" for line in text.split("\n"))
        out.append(content_ind + "$$")
    elif type_ == "Image":
        alt = render_inline(text, block.get("annotations"), False)
        out.append(ind + marker + f"![{alt}]({_render_url(_media_url(link, gateway))}) " + comment)
    else:
        url = _render_url(_media_url(link, gateway))
        visible = ""
        if text and link:
            visible = f"[{render_inline(text, block.get('annotations'), False)}]({url})"
        elif link:
            visible = f"<{_media_url(link, gateway)}>"
        elif text:
            visible = render_inline(text, block.get("annotations"), True)
        out.append(ind + marker + (visible + " " if visible else "") + comment)
        if not visible and children and children_type in _LIST_TYPES and not marker:
            shorthand = True
            child_ind = ind
    if children:
        if not shorthand and type_ != "Heading" and children_type not in _LIST_TYPES:
            out.append("")
        _render_nodes(children, child_ind, children_type, child_depth, gateway, out)
    return wrote_heading


def blocks_to_markdown(metadata: dict, content: list[dict], *, ipfs_gateway: bool = True) -> str:
    """A document (metadata, API block nodes) as Markdown, as the library's `blocksToMarkdown`:
    front matter, every block with its id in a comment, so parsing it back keeps the ids and an
    update replaces only what changed. `ipfs://` media links are shown through the ipfs.io
    gateway, as the library does by default."""
    out = [emit_frontmatter(metadata or {})[:-1]]
    _render_nodes(content or [], "", None, 0, ipfs_gateway, out)
    return "\n".join(out) + "\n"


def slugify(name: str) -> str:
    """A document path segment from its name, as the reference server's `slugifyLocal`."""
    return re.sub(r"^-+|-+$", "", re.sub(r"[^a-z0-9]+", "-", _trim(name.lower()))) or "untitled"
