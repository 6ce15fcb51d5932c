"""A fetched page's bytes as text: the charset its `Content-Type` names, if it is a real text
encoding, and the decode off the event loop when the body is large.

Python's codec registry answers to far more names than text encodings: `punycode`, `idna`,
`unicode_escape`, `utf-7`, `rot13`... and some of them are slow on hostile input (punycode's
decode is quadratic: 256 KiB froze a server for 7 s when it ran on the loop). A page names its
charset, so only the encodings pages really use are taken by name (the WHATWG Encoding
standard's list, as Python spells them); any other name reads as UTF-8, undecodable bytes
replaced. Every encoding below decodes in linear time.
"""
from __future__ import annotations

import asyncio
import codecs
from concurrent.futures import ThreadPoolExecutor

# The text encodings of the WHATWG Encoding standard (https://encoding.spec.whatwg.org/) that
# Python has, by one of their labels; compared by Python's canonical codec name.
_LABELS = (
    "utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "ascii",
    "iso-8859-1", "iso-8859-2", "iso-8859-3", "iso-8859-4", "iso-8859-5", "iso-8859-6", "iso-8859-7",
    "iso-8859-8", "iso-8859-10", "iso-8859-13", "iso-8859-14", "iso-8859-15", "iso-8859-16",
    "windows-1250", "windows-1251", "windows-1252", "windows-1253", "windows-1254", "windows-1255",
    "windows-1256", "windows-1257", "windows-1258", "cp874", "koi8-r", "koi8-u", "mac-roman",
    "mac-cyrillic", "cp866", "cp437", "cp850", "shift_jis", "cp932", "euc-jp", "iso-2022-jp", "gb2312",
    "gbk", "gb18030", "big5", "big5hkscs", "cp950", "euc-kr", "cp949", "tis-620",
)
TEXT_ENCODINGS = frozenset(codecs.lookup(label).name for label in _LABELS)

# Bodies up to this many bytes are decoded where they arrive (well under a millisecond); larger
# ones on a thread of their own, so a 5 MiB page never holds the loop.
INLINE_DECODE_BYTES = 256 << 10
_DECODER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="page-decode")


def charset(content_type: str) -> str:
    """The text encoding a `Content-Type` names, when it is one of TEXT_ENCODINGS; else utf-8."""
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "charset" and value:
            try:
                name = codecs.lookup(value.strip().strip('"').strip()).name
            except (LookupError, ValueError):
                break
            return name if name in TEXT_ENCODINGS else "utf-8"
    return "utf-8"


async def decode(body: bytes, content_type: str) -> str:
    """The body as text in its page's charset (see `charset`), bad bytes replaced."""
    encoding = charset(content_type)
    if len(body) <= INLINE_DECODE_BYTES:
        return body.decode(encoding, "replace")
    return await asyncio.get_running_loop().run_in_executor(_DECODER, _decode, body, encoding)


def _decode(body: bytes, encoding: str) -> str:
    return body.decode(encoding, "replace")
