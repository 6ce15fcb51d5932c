"""Seed hypermedia for the agent: `read hm://…` (and `navigate` to one), and `write hm://…`
(publish a document), through the server's HM client (server/hypermedia/client.py, on the runtime's
guarded HTTP client, so the HM server is reached under the network policy).

An agent publishes only with the signing identities its definition names (`signingKey`,
`signingKeys`; `options.signer` picks one of those by name, else the first): the seed is opened
from the store for that one write and never leaves this module. What comes back from the HM server
is untrusted text for the model, nothing more.
"""
from __future__ import annotations

import json

from seed_agents.protocol import hm_activity as activity
from seed_agents.protocol.actions_identities import signing_keys_of

from ..hypermedia.client import FeedPageError, HmError, HmNotFound
from ..store import identities as identities_q
from .context import ToolContext, ToolFailure, ToolResult

_WRITE_OPTIONS = {"name", "signer", "action"}
FEED_PAGE_DEFAULT, FEED_PAGE_MAX = 20, 50
FEED_BYTES = 4 << 20   # one ListEvents page read at most
_ACTIONS = ("create", "update")


def _client(ctx: ToolContext):  # noqa: ANN202
    if ctx.hm is None:
        raise ToolFailure("hm:// needs a Seed hypermedia server, and this server has none (--hm-server-url)")
    return ctx.hm


async def read(ctx: ToolContext, address: str) -> ToolResult:
    hm = _client(ctx)
    try:
        markdown = await hm.read_document(address)
    except ValueError as exc:
        raise ToolFailure(f"not an hm:// address this server can read: {exc}") from None
    except HmNotFound as exc:
        raise ToolFailure(str(exc)) from None
    except HmError as exc:
        raise ToolFailure(str(exc)) from None
    return ToolResult({"summary": f"Read {address}.", "url": address, "markdown": markdown})


async def write(ctx: ToolContext, address: str, params: dict) -> ToolResult:
    hm = _client(ctx)
    options = params.get("options") if isinstance(params.get("options"), dict) else {}
    unknown = set(options) - _WRITE_OPTIONS
    if unknown:
        raise ToolFailure(f"unrecognized option(s) for an hm:// write (refused, not ignored): "
                          f"{', '.join(sorted(unknown))}; this server takes {', '.join(sorted(_WRITE_OPTIONS))}")
    action = options.get("action", "create")
    if action not in _ACTIONS:
        raise ToolFailure(f"hm:// writes here take action {' or '.join(_ACTIONS)}; {action!r} is not available "
                          "on this server yet")
    content = params.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ToolFailure("an hm:// write needs the document's markdown in `content`")
    names = signing_keys_of(ctx.agent.get("definition") or {})
    if not names:
        raise ToolFailure("you have no signing identity to publish with (your definition names none: signingKey)")
    signer = options.get("signer", names[0])
    if signer not in names:
        raise ToolFailure(f"you can publish only as {', '.join(names)} (the identities your definition names)")
    markdown = content
    if isinstance(options.get("name"), str) and options["name"].strip() and not content.lstrip().startswith("---"):
        name = options["name"].strip().replace("\n", " ")
        markdown = f"---\nname: {_yaml_text(name)}\n---\n{content}"
    if params.get("dryRun") is True:
        return ToolResult({"summary": f"Dry run: {address} would be published as {signer}; nothing was published.",
                           "url": address, "signer": signer, "markdown": markdown})
    seed = ctx.db.read(identities_q.open_seed, ctx.box, ctx.account, signer)
    if seed is None:
        raise ToolFailure(f"the signing identity {signer!r} is gone (deleted from the account)")
    target = None if address.rstrip("/").count("/") <= 2 else address
    try:
        version = await hm.publish_document(seed, markdown, target, ctx.now_ms())
    except ValueError as exc:
        raise ToolFailure(str(exc)) from None
    except HmError as exc:
        raise ToolFailure(str(exc)) from None
    return ToolResult({"summary": f"Published {address} as {signer}.", "url": address, "version": version,
                       "signer": signer})


def _yaml_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def read_activity(ctx: ToolContext, options: dict) -> ToolResult:
    """`activity:` — the HM server's activity feed (`GET /api/ListEvents`, as the reference's
    client asks it), one page, newest first; `resource` is passed to the server as
    `filterResource`, `authors` and `eventTypes` are applied here to the page read."""
    hm = _client(ctx)
    size = options.get("pageSize")
    size = max(1, min(FEED_PAGE_MAX, size)) if isinstance(size, int) and not isinstance(size, bool) \
        else FEED_PAGE_DEFAULT
    params = {"pageSize": str(size), "currentAccount": ctx.account}
    if isinstance(options.get("pageToken"), str) and options["pageToken"]:
        params["pageToken"] = options["pageToken"]
    if isinstance(options.get("resource"), str) and options["resource"]:
        params["filterResource"] = options["resource"]
    try:
        body = await hm.feed_page(params, FEED_BYTES)
    except FeedPageError as exc:
        raise ToolFailure(f"the activity feed of {hm.display} {exc}") from None
    try:
        value = json.loads(body)
    except ValueError:
        raise ToolFailure(f"the activity feed of {hm.display} did not answer JSON") from None
    if isinstance(value, dict) and isinstance(value.get("json"), dict):
        value = value["json"]   # superjson's envelope
    events = value.get("events") if isinstance(value, dict) else None
    if not isinstance(events, list):
        raise ToolFailure(f"the activity feed of {hm.display} answered without an events list")
    events = [e for e in events if isinstance(e, dict)]
    authors = {a for a in options.get("authors") or () if isinstance(a, str)} if isinstance(
        options.get("authors"), list) else set()
    kinds = {k for k in options.get("eventTypes") or () if isinstance(k, str)} if isinstance(
        options.get("eventTypes"), list) else set()
    if authors:
        events = [e for e in events if _author(e) in authors]
    if kinds:
        events = [e for e in events if e.get("type") in kinds]
    lines = [f"- {activity.summary(e)}" for e in events]
    out = {"summary": f"Loaded {len(events)} activity feed event{'s' if len(events) != 1 else ''}.",
           "events": events, "markdown": "\n".join(lines)}
    token = value.get("nextPageToken")
    if isinstance(token, str) and token:
        out["nextPageToken"] = token
    return ToolResult(out)


def _author(event: dict) -> str | None:
    """The author's account uid, however the feed spells it (a uid, or {id: {uid}})."""
    author = event.get("author")
    if isinstance(author, str):
        return author
    if isinstance(author, dict):
        inner = author.get("id")
        if isinstance(inner, dict) and isinstance(inner.get("uid"), str):
            return inner["uid"]
        if isinstance(author.get("uid"), str):
            return author["uid"]
    return None
