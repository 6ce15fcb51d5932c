"""Reading the HM server's activity feed events (`GET /api/ListEvents`, the resolved
`LoadedEvent`s): their stable keys, times, summaries, and whether one matches an activity
trigger's source. Pure: events in, answers out. The rules are the reference's
(`agents/src/activity-triggers.ts`), plus `comment-reply`.

Feed events are untrusted input: every field is read defensively (a missing or mistyped field
means "does not match"), and nothing here raises on a strange shape.
"""
from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import unquote, urlsplit


def _s(record: object, field: str) -> str | None:
    value = record.get(field) if isinstance(record, dict) else None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _r(record: object, field: str) -> dict | None:
    value = record.get(field) if isinstance(record, dict) else None
    return value if isinstance(value, dict) else None


def _data_value(event: dict, case: str) -> dict | None:
    data = _r(event, "data")
    return _r(data, "value") if data is not None and _s(data, "case") == case else None


def _blob(event: dict) -> dict | None:
    return _r(event, "newBlob") or _r(event, "new_blob") or _data_value(event, "newBlob")


def _mention(event: dict) -> dict | None:
    return _r(event, "newMention") or _r(event, "new_mention") or _data_value(event, "newMention")


def event_key(event: dict) -> str | None:
    """A stable identity of the event (the reference's activityEventKey)."""
    key = _s(event, "feedEventId")
    if key:
        return key
    ident, kind = _s(event, "id"), _s(event, "type")
    if ident and kind:
        return f"{kind}-{ident}"
    blob = _blob(event)
    if blob is not None:
        cid = _s(blob, "cid")
        if cid and cid != "undefined":
            return f"blob-{cid}"
        blob_id = _s(blob, "blobId") or _s(blob, "blob_id")
        if blob_id:
            return f"blob-id-{blob_id}"
    mention = _mention(event)
    if mention is not None:
        source = _r(mention, "sourceBlob") or _r(mention, "source_blob")
        cid, target = _s(source, "cid"), _s(mention, "target")
        kind = _s(mention, "mentionType") or _s(mention, "mention_type") or ""
        if cid and cid != "undefined" and target:
            return f"mention-{cid}-{kind}-{target}"
    return None


def firing_key(event: dict) -> str | None:
    """The key a firing is deduplicated by: a comment's citation twin (`mention-<cid>--<target>`)
    collapses onto the comment's own `blob-<cid>`, so a mention fires once whichever arrives first."""
    key = event_key(event)
    if key and key.startswith("mention-"):
        rest = key[len("mention-"):]
        cut = rest.find("--")
        if cut > 0:
            return "blob-" + rest[:cut]
    return key


def event_time_ms(event: dict) -> int | None:
    value = event.get("eventAtMs")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    for field in ("time", "eventTime", "observeTime"):
        ms = _timestamp(event.get(field))
        if ms is not None:
            return ms
    return None


def _timestamp(value: object) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return None
    if isinstance(value, dict):
        try:
            return int(float(value.get("seconds")) * 1000 + float(value.get("nanos") or 0) / 1e6)
        except (TypeError, ValueError):
            return None
    return None


def summary(event: dict) -> str:
    kind = _s(event, "type")
    blob = _blob(event)
    if blob is not None:
        blob_type = _s(blob, "blobType") or _s(blob, "blob_type") or "activity"
        resource = _s(blob, "resource")
        return f"{blob_type} on {resource}" if resource else blob_type
    if kind == "comment":
        target = _comment_target(event)
        if _s(_r(event, "comment"), "replyParent"):
            return f"reply on {target}" if target else "reply"
        return f"comment on {target}" if target else "comment"
    resource = _site_resource(event)
    return f"{kind or 'activity'} on {resource}" if resource else (kind or "Seed activity")


# -- resources ------------------------------------------------------------------------------------
def canonical(value: str) -> str:
    """A resource id or URL as `hm://uid/path` (no version, query or trailing slash)."""
    text = value.strip()
    if not text:
        return text
    try:
        url = urlsplit(text)
    except ValueError:
        url = None
    if url is not None and url.scheme == "hm":
        return f"hm://{url.netloc}{_path(url.path)}"
    if url is not None and url.scheme in ("http", "https"):
        parts = [p for p in url.path.split("/") if p]
        if "hm" in parts and parts.index("hm") + 1 < len(parts):
            at = parts.index("hm")
            rest = [unquote(p) for p in parts[at + 2:] if not p.startswith(":")]
            return f"hm://{unquote(parts[at + 1])}{_path('/'.join(rest))}"
    return re.split(r"[?#]", text, maxsplit=1)[0].rstrip("/") or text


def _path(path: str) -> str:
    clean = re.split(r"[?#]", path, maxsplit=1)[0].strip("/")
    return f"/{clean}" if clean else ""


def _comment_target(event: dict) -> str | None:
    ident = _s(_r(_r(event, "target"), "id"), "id")
    if ident:
        return canonical(ident)
    comment = _r(event, "comment")
    account = _s(comment, "targetAccount")
    if not account:
        return None
    path = (_s(comment, "targetPath") or "").lstrip("/")
    return canonical(f"hm://{account}/{path}" if path else f"hm://{account}")


def _site_resource(event: dict) -> str | None:
    blob = _blob(event)
    if blob is not None and _s(blob, "resource"):
        return canonical(_s(blob, "resource"))
    for holder in (_r(event, "docId"), _r(_r(event, "target"), "id")):
        ident = _s(holder, "id")
        if ident:
            return canonical(ident)
    target = _comment_target(event)
    if target:
        return target
    document = _r(event, "document")
    account = _s(document, "account")
    if account:
        path = (_s(document, "path") or "").lstrip("/")
        return canonical(f"hm://{account}/{path}" if path else f"hm://{account}")
    return None


def _author(event: dict) -> str | None:
    """The author's account uid, however the event spells it."""
    author = event.get("author")
    if isinstance(author, str):
        return author
    return (_s(_r(author, "id"), "uid") or _s(author, "uid") or _s(author, "id")
            or _s(_blob(event), "author") or _s(event, "account"))


def author_of(event: dict) -> str | None:
    """The account uid an event is by (a workflow's wait on `author` asks this)."""
    return _author(event)


def resource_of(event: dict) -> str | None:
    """The hm:// resource an event is about, canonical (a workflow's wait on `resource`)."""
    resource = event.get("resource")
    return canonical(resource) if isinstance(resource, str) and resource else _site_resource(event)


def matches_wait(match: dict, event: dict) -> bool:
    """Whether an event answers a workflow's wait on the feed (the reference's
    matchesActivityCriteria): every criterion given holds: `eventType` the event's type, `author`
    its author's account, `resource` what it is about, compared canonically (no version or
    query). A wait naming a signal, or no criterion, is not the feed's to answer."""
    criteria = {k: match.get(k) for k in ("eventType", "resource", "author") if isinstance(match.get(k), str)}
    if match.get("signal") is not None or not criteria:
        return False
    if "eventType" in criteria and event.get("type") != criteria["eventType"]:
        return False
    if "author" in criteria and author_of(event) != criteria["author"].removeprefix("hm://"):
        return False
    if "resource" in criteria:
        ident = event.get("id")
        resource = resource_of(event) or (canonical(ident) if isinstance(ident, str) and ident else None)
        if not resource or resource != canonical(criteria["resource"]):
            return False
    return True


def _same_account(a: str | None, b: str) -> bool:
    return a is not None and a.removeprefix("hm://").strip("/") == b.removeprefix("hm://").strip("/")


def _under(resource: str | None, prefix: str) -> bool:
    if not resource:
        return False
    prefix = canonical(prefix)
    return resource == prefix or resource.startswith(prefix.rstrip("/") + "/")


def _contains(value: object, needle: str, depth: int = 0) -> bool:
    """Does any text inside `value` contain `needle` (bounded depth: untrusted nesting)?"""
    if depth > 20 or not needle:
        return False
    if isinstance(value, str):
        return needle in value
    if isinstance(value, dict):
        return any(_contains(v, needle, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_contains(v, needle, depth + 1) for v in value)
    return False


# -- matching -------------------------------------------------------------------------------------
def matches(source: dict, event: dict) -> bool:
    if not isinstance(event, dict):
        return False
    kind = source["type"]
    if kind == "document-comment":
        return _document_comment(source, event)
    if kind == "user-mention":
        return any(_mentions(account, source.get("resourcePrefix"), event) for account in source["mentionedAccounts"])
    if kind == "comment-reply":
        return _comment_reply(source, event)
    if kind == "site-update":
        return _site_update(source, event)
    if kind == "document-author-comment":
        return _document_author_comment(source, event)
    if kind == "activity":
        return bool(matched_alternatives(source, event))
    return False


def matched_alternatives(source: dict, event: dict) -> list[str]:
    """The ids of an `activity` source's alternatives the event matches (what a firing records
    as its matched conditions)."""
    return [alt["id"] for alt in source.get("alternatives") or () if matches(alt["source"], event)]


def _document_author_comment(source: dict, event: dict) -> bool:
    """A comment on a document in `documentAuthor`'s account, written by anyone else (the
    author's own comments never wake it: an agent answering in a comment would wake itself);
    `resourcePrefix` narrows to some of its documents."""
    owner = source["documentAuthor"]
    if _s(event, "type") != "comment":
        return False
    target = _comment_target(event)
    if not target or not _same_account(target.removeprefix("hm://").split("/", 1)[0], owner):
        return False
    commenter = _author(event) or _s(_r(event, "comment"), "author")
    if commenter is None or _same_account(commenter, owner):
        return False
    return "resourcePrefix" not in source or _under(target, source["resourcePrefix"])


def _document_comment(source: dict, event: dict) -> bool:
    resource = canonical(source["resource"])
    author = source.get("author")
    if _s(event, "type") == "comment":
        if author and not _same_account(_author(event), author):
            return False
        target = _comment_target(event)
        return _under(target, resource) if target else False
    blob = _blob(event)
    if blob is None or (_s(blob, "blobType") or _s(blob, "blob_type") or "").lower() != "comment":
        return False
    if author and not _same_account(_s(blob, "author") or _s(event, "account"), author):
        return False
    return _under(canonical(_s(blob, "resource") or ""), resource)


def _comment_reply(source: dict, event: dict) -> bool:
    """A comment answering another: `comment.replyParent` is set (its id is `<author uid>/<tsid>`,
    so `parentAuthor` names whose comments are being answered); `resource` narrows to a document."""
    if _s(event, "type") != "comment":
        return False
    parent = _s(_r(event, "comment"), "replyParent")
    if not parent:
        return False
    if "parentAuthor" in source and parent.split("/", 1)[0] != source["parentAuthor"]:
        return False
    if "resource" in source and not _under(_comment_target(event), source["resource"]):
        return False
    return True


def _linked_account(link: object) -> str | None:
    if not isinstance(link, str) or not link.strip().startswith("hm://"):
        return None
    parts = [p for p in re.split(r"[?#]", link.strip()[5:], maxsplit=1)[0].split("/") if p]
    if not parts:
        return None
    if len(parts) == 1 or parts[1] == ":profile":
        return parts[0]
    return None


def _blocks_mention(nodes: object, account: str, depth: int = 0) -> bool:
    if not isinstance(nodes, list) or depth > 20:
        return False
    for node in nodes:
        block = _r(node, "block")
        for annotation in (block or {}).get("annotations") or []:
            if isinstance(annotation, dict) and annotation.get("type") == "Embed" \
                    and _linked_account(annotation.get("link")) == account:
                return True
        if isinstance(node, dict) and _blocks_mention(node.get("children"), account, depth + 1):
            return True
    return False


def _prefix_ok(event: dict, prefix: str | None) -> bool:
    if not prefix:
        return True
    for field in ("source", "target", "commentId"):
        record = _r(event, field)
        ident = _s(_r(record, "id"), "id") or _s(record, "id")
        if ident and ident.startswith(prefix):
            return True
    return _contains(event, prefix)


def _mentions(account: str, prefix: str | None, event: dict) -> bool:
    mention = _mention(event)
    if mention is not None:
        target = _s(mention, "target") or ""
        home = f"hm://{account}"
        if target != account and target != home and not target.startswith(home + "/"):
            return False
        return not prefix or any(v and v.startswith(prefix) for v in (
            _s(mention, "source"), _s(mention, "sourceDocument") or _s(mention, "source_document"), target))
    kind = _s(event, "type")
    if kind == "comment":
        return _blocks_mention((_r(event, "comment") or {}).get("content"), account) and _prefix_ok(event, prefix)
    if kind == "citation":
        ident = _r(_r(event, "target"), "id")
        uid, path = _s(ident, "uid"), (ident or {}).get("path")
        named = uid if uid and (not isinstance(path, list) or not path or path[0] == ":profile") else None
        return named == account and _prefix_ok(event, prefix)
    return False


_ALIASES = {"change": {"doc-update", "document-update", "ref"}, "ref": {"doc-update", "document-update", "change"},
            "comment": {"comment"}, "doc-update": {"change", "ref", "document-update"},
            "document-update": {"change", "ref", "doc-update"}}


def _site_update(source: dict, event: dict) -> bool:
    resource = _site_resource(event)
    if resource:
        if not resource.startswith(canonical(source["resourcePrefix"])):
            return False
    elif not _contains(event, source["resourcePrefix"]):
        return False
    wanted = source.get("eventTypes")
    if not wanted:
        return True
    actual = [t.lower() for t in (_s(event, "type"), _s(_r(event, "data"), "case"),
                                  _s(_blob(event), "blobType") or _s(_blob(event), "blob_type")) if t]
    for configured in (w.strip().lower() for w in wanted):
        if any(configured == a or a in _ALIASES.get(configured, ()) for a in actual):
            return True
    return False
