"""The operations that turn a document's current blocks into new ones, as
`@seed-hypermedia/client`'s `block-diff` computes them for an update in place.

Blocks are matched by id (Markdown read from a document keeps its ids in `<!-- id:… -->`
comments): a new or changed block is a `ReplaceBlock`, a level whose order changed is one
`MoveBlocks`, and every old block the new tree no longer has goes in one `DeleteBlocks`. Tables
keep their column, row and cell ids (`rebind_table_identities`), since Markdown only carries the
table's, columns' and rows' ids.
"""

from __future__ import annotations

import json

from .hm_markdown import js_ordered

__all__ = [
    "to_api_node",
    "from_api_node",
    "blocks_map",
    "rebind_table_identities",
    "compute_replace_ops",
]


def to_api_node(node: dict) -> dict:
    """`toAPIBlockNode`: every field present, defaults filled."""
    block = node["block"]
    return {
        "block": {
            "id": block["id"], "type": block["type"], "text": block.get("text") or "",
            "link": block.get("link") or "", "annotations": block.get("annotations") or [],
            "attributes": block.get("attributes") or {},
        },
        "children": [to_api_node(c) for c in node.get("children") or []],
    }


def _extra(attrs: dict | None) -> dict:
    return {k: v for k, v in (attrs or {}).items() if k not in ("childrenType", "language")}


def from_api_node(node: dict) -> dict:
    """`hmBlockNodeToBlockNode`: an API block node → the parser's node shape."""
    b = node["block"]
    attrs = b.get("attributes") or {}
    extra = _extra(attrs)
    block: dict = {"type": b.get("type") or "", "id": b.get("id") or "", "text": b.get("text") or "",
                   "annotations": b.get("annotations") or []}
    if attrs.get("childrenType"):
        block["childrenType"] = attrs["childrenType"]
    if attrs.get("language"):
        block["language"] = attrs["language"]
    if b.get("link"):
        block["link"] = b["link"]
    if extra:
        block["attributes"] = extra
    return {"block": block, "children": [from_api_node(c) for c in node.get("children") or []]}


def blocks_map(nodes: list[dict], parent_id: str = "") -> dict[str, dict]:
    """`createBlocksMap`: block id → {parent, left sibling, block}, in the JavaScript object's
    key order (ids that look like array indexes first), which DeleteBlocks inherits."""
    return js_ordered(_blocks_map(nodes, parent_id))


def _blocks_map(nodes: list[dict], parent_id: str = "") -> dict[str, dict]:
    result: dict[str, dict] = {}
    for idx, node in enumerate(nodes):
        block = node.get("block") or {}
        if not block.get("id"):
            continue
        prev = nodes[idx - 1] if idx > 0 else None
        result[block["id"]] = {"parent": parent_id, "left": ((prev or {}).get("block") or {}).get("id") or "",
                               "block": block}
        if node.get("children"):
            result.update(_blocks_map(node["children"], block["id"]))
    return result


def _old_header_cell_text(row: dict | None, column_id: str) -> str | None:
    if row is None:
        return None
    for cell in row.get("children") or []:
        if ((cell.get("block") or {}).get("attributes") or {}).get("columnId") == column_id:
            return cell["block"].get("text") or ""
    return None


def rebind_table_identities(old_nodes: list[dict], new_nodes: list[dict]) -> list[dict]:
    """`rebindTableIdentities`: give each new table the old table's column/row/cell ids."""
    old_tables: dict[str, dict] = {}

    def index(nodes: list[dict]) -> None:
        for node in nodes:
            if (node.get("block") or {}).get("type") == "Table":
                old_tables[node["block"]["id"]] = node
            if node.get("children"):
                index(node["children"])

    index(old_nodes)

    def walk(nodes: list[dict]) -> list[dict]:
        out = []
        for node in nodes:
            if node["block"]["type"] == "Table":
                out.append(_rebind_table(old_tables.get(node["block"]["id"]), node))
            else:
                out.append({**node, "children": walk(node["children"])})
        return out

    return walk(new_nodes)


def _match_remaining(news: list[dict], olds: list[dict], matched: list, used: set[str]) -> None:
    remaining = [o for o in olds if o["block"]["id"] not in used]
    k = 0
    for idx in range(len(news)):
        if matched[idx] is not None:
            continue
        if k < len(remaining):
            matched[idx] = remaining[k]
            used.add(remaining[k]["block"]["id"])
            k += 1


def _rebind_table(old_table: dict | None, new_table: dict) -> dict:
    new_cols = [c for c in new_table["children"] if c["block"]["type"] == "TableColumn"]
    new_rows = [c for c in new_table["children"] if c["block"]["type"] == "TableRow"]
    others = [c for c in new_table["children"] if c["block"]["type"] not in ("TableColumn", "TableRow")]
    old_children = (old_table or {}).get("children") or []
    old_cols = [c for c in old_children if (c.get("block") or {}).get("type") == "TableColumn"]
    old_rows = [c for c in old_children if (c.get("block") or {}).get("type") == "TableRow"]
    old_col_by_id = {c["block"]["id"]: c for c in old_cols}
    old_row_by_id = {r["block"]["id"]: r for r in old_rows}

    used_cols: set[str] = set()
    matched_cols: list = [None] * len(new_cols)
    for idx, col in enumerate(new_cols):
        old = old_col_by_id.get(col["block"]["id"])
        if old is not None and old["block"]["id"] not in used_cols:
            matched_cols[idx] = old
            used_cols.add(old["block"]["id"])
    old_header = next((r for r in old_rows if (r["block"].get("attributes") or {}).get("isHeader") is True), None)
    new_header = next((r for r in new_rows if (r["block"].get("attributes") or {}).get("isHeader") is True), None)
    if old_header is not None and new_header is not None:
        text_to_old: dict[str, dict | None] = {}
        for old in old_cols:
            if old["block"]["id"] in used_cols:
                continue
            text = _old_header_cell_text(old_header, old["block"]["id"])
            if not text:
                continue
            text_to_old[text] = None if text in text_to_old else old
        for idx, col in enumerate(new_cols):
            if matched_cols[idx] is not None:
                continue
            cell = next((c for c in new_header["children"]
                         if (c["block"].get("attributes") or {}).get("columnId") == col["block"]["id"]), None)
            text = (cell["block"].get("text") or "") if cell else ""
            old = text_to_old.get(text) if text else None
            if old is not None and old["block"]["id"] not in used_cols:
                matched_cols[idx] = old
                used_cols.add(old["block"]["id"])
    _match_remaining(new_cols, old_cols, matched_cols, used_cols)

    col_ids: dict[str, str] = {}
    final_cols = []
    for idx, col in enumerate(new_cols):
        old = matched_cols[idx]
        final_id = old["block"]["id"] if old is not None else col["block"]["id"]
        col_ids[col["block"]["id"]] = final_id
        carried = {**_extra((old or {}).get("block", {}).get("attributes")), **(col["block"].get("attributes") or {})}
        block = {**col["block"], "id": final_id}
        if carried:
            block["attributes"] = carried
        final_cols.append({"block": block, "children": []})

    used_rows: set[str] = set()
    matched_rows: list = [None] * len(new_rows)
    for idx, row in enumerate(new_rows):
        old = old_row_by_id.get(row["block"]["id"])
        if old is not None and old["block"]["id"] not in used_rows:
            matched_rows[idx] = old
            used_rows.add(old["block"]["id"])
    _match_remaining(new_rows, old_rows, matched_rows, used_rows)

    final_rows = []
    for idx, row in enumerate(new_rows):
        old = matched_rows[idx]
        row_id = old["block"]["id"] if old is not None else row["block"]["id"]
        old_extras = {k: v for k, v in _extra((old or {}).get("block", {}).get("attributes")).items() if k != "isHeader"}
        row_attrs = {**old_extras, **(row["block"].get("attributes") or {})}
        cells = []
        for cell in row["children"]:
            new_col = (cell["block"].get("attributes") or {}).get("columnId")
            final_col = col_ids.get(new_col, new_col) if isinstance(new_col, str) else new_col
            old_cell = None
            if old is not None:
                old_cell = next((c for c in old.get("children") or []
                                 if ((c.get("block") or {}).get("attributes") or {}).get("columnId") == final_col), None)
            cell_attrs = {**_extra((old_cell or {}).get("block", {}).get("attributes")),
                          **(cell["block"].get("attributes") or {}), "columnId": final_col}
            cells.append({"block": {**cell["block"], "id": old_cell["block"]["id"] if old_cell else cell["block"]["id"],
                                    "attributes": cell_attrs}, "children": cell["children"]})
        block = {**row["block"], "id": row_id}
        if row_attrs:
            block["attributes"] = row_attrs
        final_rows.append({"block": block, "children": cells})

    for nodes in (final_cols, final_rows):
        for idx, node in enumerate(nodes):
            attrs = node["block"].get("attributes") or {}
            if idx == 0 or attrs.get("isHeader") is not True:
                continue
            node["block"] = {**node["block"], "attributes": {k: v for k, v in attrs.items() if k != "isHeader"}}
    table_attrs = {**_extra((old_table or {}).get("block", {}).get("attributes")),
                   **(new_table["block"].get("attributes") or {})}
    table_block = {**new_table["block"]}
    if table_attrs:
        table_block["attributes"] = table_attrs
    return {"block": table_block, "children": final_cols + final_rows + others}


def compute_replace_ops(old_map: dict[str, dict], tree: list[dict], parent_id: str = "") -> list[dict]:
    """`computeReplaceOps`: the operations from the old document (`blocks_map`) to `tree`."""
    touched: set[str] = set()
    ops = _replace_ops(old_map, tree, parent_id, touched)
    deleted = [bid for bid in old_map if bid not in touched]
    if deleted:
        ops.append({"type": "DeleteBlocks", "blocks": deleted})
    return ops


def _old_sibling_order(old_map: dict[str, dict], parent_id: str) -> list[str]:
    by_left = {}
    for bid, entry in old_map.items():
        if entry["parent"] == parent_id:
            by_left[entry["left"]] = bid
    order: list[str] = []
    cur = by_left.get("")
    while cur is not None and cur not in order:
        order.append(cur)
        cur = by_left.get(cur)
    return order


def _replace_ops(old_map: dict[str, dict], tree: list[dict], parent_id: str, touched: set[str]) -> list[dict]:
    ops: list[dict] = []
    ids: list[str] = []
    for node in tree:
        blk = node["block"]
        bid = blk["id"]
        touched.add(bid)
        ids.append(bid)
        old = old_map.get(bid)
        block = {**(blk.get("attributes") or {}), "type": blk["type"], "id": bid, "text": blk.get("text"),
                 "annotations": blk.get("annotations")}
        for key in ("language", "childrenType", "link"):
            if blk.get(key) is not None:
                block[key] = blk[key]
        if old is None or not _content_equal(old["block"], blk):
            ops.append({"type": "ReplaceBlock", "block": block})
        if node["children"]:
            ops.extend(_replace_ops(old_map, node["children"], bid, touched))
    if ids and _old_sibling_order(old_map, parent_id) != ids:
        ops.append({"type": "MoveBlocks", "blocks": ids, "parent": parent_id})
    return ops


def _js_json(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _canonical_annotation(ann: dict | None) -> dict:
    a = ann or {}
    starts = a.get("starts") or []
    ends = a.get("ends") or []
    keep = [i for i in range(len(starts)) if (ends[i] if i < len(ends) else -1) > starts[i]]
    out: dict = {"type": a.get("type"), "starts": [starts[i] for i in keep], "ends": [ends[i] for i in keep]}
    if a.get("link"):
        out["link"] = a["link"]
    attrs = a.get("attributes")
    if attrs:
        out["attributes"] = {k: attrs[k] for k in sorted(attrs)}
    return out


def _has_range(a: dict) -> bool:
    return any((a["ends"][i] if i < len(a["ends"]) else -1) > s for i, s in enumerate(a["starts"]))


def _annotation_order(a: dict) -> tuple:
    sa = a["starts"][0] if a["starts"] else 0
    ea = a["ends"][0] if a["ends"] else 0
    t = str(a["type"])
    return (sa, -ea, t.lower(), t.swapcase())


def _content_equal(old: dict, new: dict) -> bool:
    """`isBlockContentEqual`: an old API block against a new parser block."""
    if old.get("type") != new.get("type"):
        return False
    if (old.get("text") or "") != (new.get("text") or ""):
        return False
    if (old.get("link") or "") != (new.get("link") or ""):
        return False
    old_ann = sorted((a for a in map(_canonical_annotation, old.get("annotations") or []) if _has_range(a)),
                     key=_annotation_order)
    new_ann = sorted((a for a in map(_canonical_annotation, new.get("annotations") or []) if _has_range(a)),
                     key=_annotation_order)
    if len(old_ann) != len(new_ann):
        return False
    if old_ann and _js_json(old_ann) != _js_json(new_ann):
        return False
    old_attrs = old.get("attributes") or {}
    if (old_attrs.get("childrenType") or "") != (new.get("childrenType") or ""):
        return False
    if (old_attrs.get("language") or "") != (new.get("language") or ""):
        return False
    a, b = _extra(old_attrs), new.get("attributes") or {}
    return all(a.get(k) == b.get(k) or _js_json(a.get(k)) == _js_json(b.get(k)) for k in {**a, **b})
