"""Drafts: `write hm://…` with the reference's `draft.*` raw commands (`options.action`), a document
kept in the store (server/store/drafts.py, table `agent_drafts`) until `draft.publish` sends it
to the HM server. As the reference's writeDraftCreate / Update / Get / List / Delete / Publish:
the command's own fields ride in `options.input` (`draftId`, `edit`, `location`, `visibility`,
`limit`), the address gives the path, `content` the Markdown, `options.name` / `options.metadata`
the metadata.

Drafts belong to the agent (per account and agent, as the reference keeps them), so whoever may
run the agent's `write hm://` (the publish grant; a collaborator only with `collaboratorsPublish`,
server/tools/hm_tools.write) may keep its drafts; only `draft.publish` signs, with one of the
identities the definition names. Whatever a draft says is the model's text, kept as blocks.
"""
from __future__ import annotations

import asyncio
import uuid

from seed_agents.protocol.hm.hm_ids import parse_hm_id
from seed_agents.protocol.hm.hm_markdown import blocks_to_markdown, parse_markdown, to_hm_nodes

from ..hypermedia.client import MAX_MARKDOWN_BYTES, HmError
from ..store import drafts as drafts_q
from .context import ToolContext, ToolFailure, ToolResult

COMMANDS = ("draft.create", "draft.update", "draft.get", "draft.list", "draft.delete", "draft.publish")
MAX_LISTED = 100
MAX_SHOWN_BYTES = 256 * 1024   # a draft's Markdown in draft.get, as a read's


def _result(command: str, summary: str, fields: dict, row: dict | None = None) -> ToolResult:
    """The reference's writeToolResult: a draft command names no signer, except draft.publish."""
    out: dict = {"summary": summary, "type": "hypermedia_write_result", "command": command}
    if row is not None:
        out["signer"] = {"profileName": row.get("label") or row["name"], "publicKey": row["accountId"],
                         "name": row["name"]}
    out.update(message=f"{command} completed", **fields)
    return ToolResult(out)


def _draft_id(fields: dict, command: str) -> str:
    value = fields.get("draftId", fields.get("draft"))
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ToolFailure(f"{command} needs options.input.draftId (the id draft.create answered)")
    return value.strip()


def _optional_text(fields: dict, key: str) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 2048:
        raise ToolFailure(f"options.input.{key} must be a string of at most 2048 characters")
    return value


async def _blocks(content: str) -> tuple[list, dict]:
    """The Markdown's blocks (API block nodes, fresh ids) and its front matter."""
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolFailure("the draft is not valid Unicode (it has a lone surrogate)") from None
    if size > MAX_MARKDOWN_BYTES:
        raise ToolFailure(f"a draft is at most {MAX_MARKDOWN_BYTES} bytes of Markdown")
    tree, front = await asyncio.to_thread(parse_markdown, content)
    return to_hm_nodes(tree), front


def _path_of(address: str) -> str | None:
    try:
        hm_id = parse_hm_id(address)
    except ValueError as exc:
        raise ToolFailure(f"not an hm:// address: {exc}") from None
    return hm_id.api_path or None


async def write(ctx: ToolContext, address: str, command: str, options: dict, params: dict,
                metadata: dict | None, signer, seed_of) -> ToolResult:  # noqa: ANN001
    """One draft command (the publish grant was checked by the caller; for draft.publish,
    `signer(choice)` resolves the identity and `seed_of(row)` opens its seed)."""
    fields = options.get("input") if isinstance(options.get("input"), dict) else {}
    dry_run = params.get("dryRun") is True
    account, agent_id = ctx.account, ctx.agent["id"]
    content = params.get("content")
    if command == "draft.create":
        if not isinstance(content, str) or not content.strip():
            raise ToolFailure("draft.create needs the draft's markdown in `content`")
        blocks, front = await _blocks(content)
        merged = {**front, **(metadata or {})}
        name = merged.get("name") if isinstance(merged.get("name"), str) else ""
        if not name.strip():
            raise ToolFailure("draft.create requires a name — pass name (or metadata: {name}, or frontmatter name)")
        draft_id = str(uuid.uuid4())
        if dry_run:
            return _result(command, f"Dry run: a draft named {name!r} would be kept.",
                           {"draftId": draft_id, "name": name, "metadata": merged, "dryRun": True})
        edit, location, visibility = (_optional_text(fields, k) for k in ("edit", "location", "visibility"))
        path = _optional_text(fields, "path") or _path_of(address)
        await ctx.db.write(lambda conn: drafts_q.insert_draft(conn, draft_id, account, agent_id, name, blocks, merged,
                                                              edit, location, path, visibility, ctx.now_ms()))
        return _result(command, f"Kept the draft {name!r} ({draft_id}); draft.publish sends it.",
                       {"draftId": draft_id, "name": name, "metadata": merged})
    if command == "draft.list":
        limit = fields.get("limit", 50)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ToolFailure("options.input.limit must be a positive whole number")
        drafts = await ctx.db.aread(drafts_q.list_drafts, account, agent_id, min(limit, MAX_LISTED))
        return _result(command, f"{len(drafts)} draft{'s' if len(drafts) != 1 else ''}.", {"drafts": drafts})
    draft_id = _draft_id(fields, command)
    draft = await ctx.db.aread(drafts_q.get_draft, account, agent_id, draft_id)
    if draft is None:
        raise ToolFailure(f"Draft not found: {draft_id}")
    if command == "draft.get":
        markdown = blocks_to_markdown(draft["metadata"], draft["blocks"], ipfs_gateway=False)
        raw = markdown.encode("utf-8")
        shown = {"markdown": raw[:MAX_SHOWN_BYTES].decode("utf-8", "ignore") + "\n[truncated]", "truncated": True} \
            if len(raw) > MAX_SHOWN_BYTES else {"markdown": markdown}
        return _result(command, f"The draft {draft['name']!r}.", {
            "draftId": draft_id, "name": draft["name"], "metadata": draft["metadata"], **shown,
            "status": draft["status"], "edit": draft["edit"], "location": draft["location"], "path": draft["path"],
            "visibility": draft["visibility"]})
    if command == "draft.update":
        if content is not None:
            if not isinstance(content, str):
                raise ToolFailure("draft.update `content` must be markdown")
            blocks, front = await _blocks(content)
            merged = {**front, **(metadata or {})}
        else:
            blocks, merged = draft["blocks"], {**draft["metadata"], **(metadata or {})}
        name = merged.get("name") if isinstance(merged.get("name"), str) and merged["name"].strip() \
            else draft["name"] or "Untitled"
        if dry_run:
            return _result(command, f"Dry run: the draft {draft_id} would change.",
                           {"draftId": draft_id, "name": name, "metadata": merged, "dryRun": True})
        edit, location, visibility, path = (_optional_text(fields, k) for k in ("edit", "location", "visibility",
                                                                                "path"))
        updated = await ctx.db.write(lambda conn: drafts_q.update_draft(
            conn, account, agent_id, draft_id, name, blocks, merged, edit, location, path, visibility, ctx.now_ms()))
        if updated is None:
            raise ToolFailure(f"Draft not found: {draft_id}")
        return _result(command, f"Updated the draft {name!r}.", {"draftId": draft_id, "name": name,
                                                                 "metadata": merged})
    if command == "draft.delete":
        if dry_run:
            return _result(command, f"Dry run: the draft {draft_id} would be deleted.",
                           {"draftId": draft_id, "dryRun": True})
        await ctx.db.write(lambda conn: drafts_q.mark_deleted(conn, account, agent_id, draft_id, ctx.now_ms()))
        return _result(command, f"Deleted the draft {draft_id}.", {"draftId": draft_id, "status": "deleted"})
    return await _publish(ctx, draft, options, dry_run, signer, seed_of)


async def _publish(ctx: ToolContext, draft: dict, options: dict, dry_run: bool, signer, seed_of) -> ToolResult:  # noqa: ANN001
    """draft.publish: a new document from the draft's blocks (byte for byte as the reference), or
    with an edit target a new version of that document (its blocks as Markdown with their ids, so
    only what changed is replaced), signed by one of the agent's identities."""
    row = signer(options.get("signer"))
    metadata = {**draft["metadata"], "name": draft["name"]} if draft["name"] else dict(draft["metadata"])
    command = "document.update" if draft["edit"] else "document.create"
    if dry_run:
        return _result("draft.publish", f"Dry run: the draft {draft['id']} would be published as {row['name']}.",
                       {"draftId": draft["id"], "name": draft["name"], "dryRun": True}, row)
    links = options.get("skipLinkCheck") is not True
    seed = seed_of(row)
    try:
        if draft["edit"]:
            markdown = blocks_to_markdown({}, draft["blocks"], ipfs_gateway=False)
            version = await ctx.hm.publish_document(seed, markdown, draft["edit"], ctx.now_ms(), check_links=links,
                                                    metadata=metadata)
            published = {"id": draft["edit"], "version": version}
        else:
            published = await ctx.hm.publish_draft(seed, draft["blocks"], metadata, draft["path"], ctx.now_ms(),
                                                   check_links=links)
    except ValueError as exc:
        raise ToolFailure(str(exc)) from None
    except HmError as exc:
        raise ToolFailure(str(exc)) from None
    await ctx.db.write(lambda conn: drafts_q.mark_published(conn, ctx.account, ctx.agent["id"], draft["id"],
                                                            published["id"], published["version"], ctx.now_ms()))
    return _result("draft.publish", f"Published the draft {draft['name']!r} as {published['id']} ({command}).",
                   {**published, "draftId": draft["id"], "published": command}, row)
