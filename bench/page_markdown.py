"""Which maintained extractor turns a web page into the Markdown an agent reads
(server/tools/web.py): trafilatura against readability-lxml + markdownify.

Two questions, on the same pages: does the main text come through while navigation, footers and
cookie banners stay out (pages made here, where we know which is which), and what does a page
cost (time per page, median of several rounds; also on real pages given with --pages DIR, e.g.
saved documentation pages)? `python -m bench.page_markdown [--pages DIR] [--rounds N]` prints
JSON.

Measured (2 shared cores; 40 pages of the rustc book as --pages): both keep all the main text and
none of the boilerplate on the made pages, at about the same cost (a 540 KB page: ~1.6 s each);
on the real pages readability is faster at the median (79 ms against 121 ms) but loses the text of
every heading that is a self-link (1070 of 1091 headings came out as empty `#` lines; trafilatura
lost none). Chosen: trafilatura.
Its time grows with the page (one run saw 10 s on the largest page with the machine busy), so the
HTML it is given is cut at server/tools/web.py EXTRACT_CHARS (1 MB) and it runs in a thread.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

NAV = "Home | Products | Pricing | Blog | Careers | Contact us"
FOOTER = "Copyright 2026 Example Corp. All rights reserved. Privacy policy. Terms of service."
COOKIE = "We use cookies to improve your experience. Accept all cookies?"
MAIN = [
    "The red kite is a bird of prey with a deeply forked tail.",
    "Kites nearly vanished from many regions a century ago and have returned since.",
    "Look for the forked tail over hills and farmland in the middle of the day.",
    "| Region | Pairs |",
]


def _article(paragraphs: int) -> str:
    body = "".join(f"<p>{MAIN[i % 3]} Paragraph {i} adds detail about habitat, diet and behaviour "
                   f"so that the article reads like a real one.</p>" for i in range(paragraphs))
    table = ("<table><tr><th>Region</th><th>Pairs</th></tr><tr><td>Wales</td><td>2000</td></tr>"
             "<tr><td>Chilterns</td><td>1000</td></tr></table>")
    return (f"<!doctype html><html><head><title>Red kites</title></head><body>"
            f"<div class='cookie-banner'>{COOKIE}</div><header><nav>{NAV}</nav></header>"
            f"<main><article><h1>Red kites</h1>{body}<h2>Numbers</h2>{table}</article></main>"
            f"<aside><ul>" + "".join(f"<li><a href='/x{i}'>Related story {i}</a></li>" for i in range(30)) +
            f"</ul></aside><footer>{FOOTER}</footer></body></html>")


PAGES = {"short article": _article(4), "long article": _article(120), "huge article": _article(3000)}


def trafilatura_md(html: str) -> str:
    from seed_agents.server.tools.web import page_markdown

    return page_markdown(html, "https://example.org/")[0]


def readability_md(html: str) -> str:
    from markdownify import markdownify
    from readability import Document

    return markdownify(Document(html).summary(html_partial=True), heading_style="ATX")


EXTRACTORS = {"trafilatura": trafilatura_md, "readability-lxml+markdownify": readability_md}


EMPTY_HEADING = re.compile(r"^#+[ \t]*$", re.M)
HEADING = re.compile(r"^#+ ", re.M)


def quality(markdown: str) -> dict:
    return {"main_kept": sum(s.split(" |")[0] in markdown for s in MAIN) / len(MAIN),
            "boilerplate_kept": sum(b[:30] in markdown for b in (NAV, FOOTER, COOKIE)) / 3,
            "chars": len(markdown)}


def timed(fn, html: str, rounds: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(html)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", help="a directory of saved .html pages to time as well")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    out: dict = {}
    for name, fn in EXTRACTORS.items():
        fn(PAGES["short article"])   # imports and warm-up
        row: dict = {}
        for page, html in PAGES.items():
            row[page] = {"ms": timed(fn, html, args.rounds), "html_chars": len(html), **quality(fn(html))}
        if args.pages:
            files = sorted(Path(args.pages).glob("**/*.html"))[:40]
            htmls = [f.read_text(errors="replace") for f in files]
            times = [timed(fn, html, args.rounds) for html in htmls]
            outputs = [fn(html) for html in htmls]
            row["real pages"] = {"pages": len(files), "median_ms": statistics.median(times) if times else None,
                                 "max_ms": max(times) if times else None,
                                 # a heading whose text was lost (e.g. a heading that is a self-link)
                                 "empty_headings": sum(len(EMPTY_HEADING.findall(o)) for o in outputs),
                                 "headings": sum(len(HEADING.findall(o)) for o in outputs)}
        out[name] = row
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
