"""The Seed document block tree that the desktop sends as a system prompt or with a message
(`[{block: {id, type, text?, attributes?, link?, ...}, children?: [...]}]`), checked and turned
into Markdown. Pure: values in, values out.

The model reads Markdown, never the tree: headings become `#` lines (one level deeper under each
heading), the children of a block whose `attributes.childrenType` is `Ordered`, `Unordered` or
`Blockquote` become a numbered list, a bulleted list or a quote, other children follow their
parent, blocks are separated by blank lines, code is fenced, math is a `$$` block, media blocks
are links, and a block of an unknown type contributes its text. The inline annotations of
paragraphs and headings are rendered as the reference's `blocksToMarkdown` renders them (bold
`**`, italic `_`, strike `~~`, code `` ` ``, underline `<u>`, links `[text](url)`, inline
embeds `<url>`), so a link in a prompt reaches the model with its URL; the text between them is
kept as written, unescaped, as there.
"""
from __future__ import annotations

import re

MAX_DEPTH = 64  # the envelope's own nesting bound; a deeper tree cannot arrive in a frame anyway
_LIST_TYPES = ("Ordered", "Unordered", "Blockquote")
_MEDIA = ("Video", "File", "Embed", "WebEmbed", "Button", "Nostr")


class BlockTreeError(ValueError):
    """A malformed tree: `path` locates the fault (e.g. `[0].children[2].block.type`)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path} {problem}" if path else problem)
        self.path = path
        self.problem = problem


def check_tree(value: object) -> list:
    """`value` if it is a well-formed block tree, else BlockTreeError naming where it is not."""
    if type(value) is not list:
        raise BlockTreeError("", f"must be an array of blocks, got {_kind(value)}")
    _check_nodes(value, "", 1)
    return value


def _check_nodes(nodes: list, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise BlockTreeError(path, f"nests blocks deeper than {MAX_DEPTH} levels")
    for i, node in enumerate(nodes):
        where = f"{path}[{i}]"
        if type(node) is not dict:
            raise BlockTreeError(where, f"must be a map {{block, children?}}, got {_kind(node)}")
        block = node.get("block")
        if type(block) is not dict:
            raise BlockTreeError(f"{where}.block", f"must be a map {{id, type, ...}}, got {_kind(block)}")
        for field in ("id", "type"):
            if type(block.get(field)) is not str or not block[field]:
                raise BlockTreeError(f"{where}.block.{field}", f"must be non-empty text, got {_kind(block.get(field))}")
        for field in ("text", "link"):
            if block.get(field) is not None and type(block[field]) is not str:
                raise BlockTreeError(f"{where}.block.{field}", f"must be text, got {_kind(block[field])}")
        if block.get("attributes") is not None and type(block["attributes"]) is not dict:
            raise BlockTreeError(f"{where}.block.attributes", f"must be a map, got {_kind(block['attributes'])}")
        children = node.get("children")
        if children is not None:
            if type(children) is not list:
                raise BlockTreeError(f"{where}.children", f"must be an array of blocks, got {_kind(children)}")
            _check_nodes(children, f"{where}.children", depth + 1)


def to_markdown(tree: object) -> str:
    """Markdown for a block tree. Lenient: parts that are not blocks are skipped, so a stored
    tree always renders (trees are checked with `check_tree` when they arrive)."""
    if type(tree) is not list:
        return ""
    return "\n\n".join(_chunks(tree, 1, 1))


def system_prompt_markdown(definition: dict) -> str:
    """What the model receives as the system prompt of an AgentDefinition (and what
    GetSession.systemPromptMarkdown shows): the text as given, or the block tree as Markdown."""
    prompt = definition.get("systemPrompt") if type(definition) is dict else None
    if type(prompt) is str:
        return prompt
    return to_markdown(prompt)


# --- rendering --------------------------------------------------------------------------------

def _chunks(nodes: list, level: int, depth: int) -> list[str]:
    """Markdown blocks (to be joined by blank lines) for sibling nodes; `level` is the heading
    level a Heading among them takes."""
    out: list[str] = []
    if depth > MAX_DEPTH:
        return out
    for node in nodes:
        if type(node) is dict and type(node.get("block")) is dict:
            out.extend(_node(node, level, depth))
    return out


def _node(node: dict, level: int, depth: int) -> list[str]:
    block = node["block"]
    kind = block.get("type")
    own = _block(block, kind, level)
    out = [own] if own else []
    children = node.get("children")
    if type(children) is not list or not children:
        return out
    child_level = min(level + 1, 6) if kind == "Heading" else level
    style = _children_type(block)
    if style in _LIST_TYPES:
        items = [_item(_chunks([child], child_level, depth + 1), style, n)
                 for n, child in enumerate(children, 1)]
        items = [item for item in items if item]
        if items:
            out.append(("\n>\n" if style == "Blockquote" else "\n").join(items))
    else:
        out.extend(_chunks(children, child_level, depth + 1))
    return out


def _children_type(block: dict) -> str | None:
    attributes = block.get("attributes")
    style = attributes.get("childrenType") if type(attributes) is dict else None
    if style is None:
        style = block.get("childrenType")   # older documents keep it on the block itself
    return style if type(style) is str else None


def _item(chunks: list[str], style: str, number: int) -> str:
    if not chunks:
        return ""
    body = "\n\n".join(chunks)
    if style == "Blockquote":
        return "\n".join(("> " + line) if line else ">" for line in body.split("\n"))
    marker = f"{number}. " if style == "Ordered" else "- "
    pad = " " * len(marker)
    lines = body.split("\n")
    return "\n".join([marker + lines[0]] + [(pad + line) if line else "" for line in lines[1:]])


def _block(block: dict, kind: object, level: int) -> str:
    text = block.get("text")
    text = text if type(text) is str else ""
    link = block.get("link")
    link = link if type(link) is str else ""
    if kind == "Heading":
        title = " ".join(_annotated(text, block.get("annotations")).split())
        return f"{'#' * level} {title}" if title else ""
    if kind == "Paragraph":
        return _annotated(text, block.get("annotations"))
    if kind == "Code":
        attributes = block.get("attributes")
        language = attributes.get("language") if type(attributes) is dict else None
        language = language if type(language) is str and "`" not in language else ""
        fence = "`" * max(3, _longest_run(text, "`") + 1)
        return f"{fence}{language.strip()}\n{text}\n{fence}"
    if kind == "Math":
        return f"$$\n{text}\n$$" if text else ""
    if kind == "Image":
        return f"![{text}]({link})" if link else text
    if kind in _MEDIA and link:
        return f"[{text or kind}]({link})"
    return text   # Paragraph, and any type this converter does not know: its text


_MARKERS = {"Bold": ("**", "**"), "Italic": ("_", "_"), "Strike": ("~~", "~~"), "Code": ("`", "`"),
            "Underline": ("<u>", "</u>")}


def _marker(annotation: dict, opening: bool) -> str:
    kind = annotation.get("type")
    link = annotation.get("link")
    link = link if type(link) is str else ""
    if kind == "Link":
        return "[" if opening else f"]({link})"
    if kind == "Embed":
        return f"<{link}" if opening else ">"
    pair = _MARKERS.get(kind) if type(kind) is str else None
    return "" if pair is None else pair[0 if opening else 1]


def _annotated(text: str, annotations: object) -> str:
    """`text` with its annotations' markers inserted, as the reference's applyAnnotations: every
    start opens and every end closes, in offset order (opens first at one offset), and the inline
    embed placeholder U+FFFC is dropped. Offsets count UTF-16 code units, as JavaScript strings
    do; one inside a surrogate pair moves to the pair's end. Malformed annotations are skipped."""
    if type(annotations) is not list or not annotations:
        return text
    # code-point index of each UTF-16 offset (rounded up to a code-point boundary)
    bounds = [0]
    for ch in text:
        bounds.append(bounds[-1] + (2 if ord(ch) > 0xFFFF else 1))

    def index(pos: int) -> int:
        pos = max(0, min(pos, bounds[-1]))
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi) // 2
            if bounds[mid] < pos:
                lo = mid + 1
            else:
                hi = mid
        return lo

    markers: list[tuple[int, int, str]] = []   # (offset, 0 open / 1 close, marker), stable order
    for annotation in annotations:
        if type(annotation) is not dict:
            continue
        starts, ends = annotation.get("starts"), annotation.get("ends")
        if type(starts) is not list or type(ends) is not list:
            continue
        for i, start in enumerate(starts):
            if type(start) is not int:
                continue
            markers.append((index(start), 0, _marker(annotation, True)))
            if i < len(ends) and type(ends[i]) is int:
                markers.append((index(ends[i]), 1, _marker(annotation, False)))
    markers.sort(key=lambda m: (m[0], m[1]))
    out, last = [], 0
    for at, _, marker in markers:
        out.append(text[last:at])
        out.append(marker)
        last = at
    out.append(text[last:])
    return "".join(out).replace("\ufffc", "")


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max((len(r) for r in runs), default=0)


def _kind(v: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "text",
            bytes: "a byte string", list: "an array", dict: "a map",
            type(None): "nothing"}.get(type(v), type(v).__name__)
