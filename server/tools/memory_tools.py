"""The agent's own files: `~/memory/…` for `read` and `write`, the `search` tool (full text over
memory), and `attachment:<id>` (a file attached to this conversation).

Every function acts on the agent of the context and the session of the context: an address can
name a path, never another agent or session, so the agent reads and writes only its own memory
(server/store/memory.py, bytes in server/store/blobs.py).
"""
from __future__ import annotations

from seed_agents.protocol.wire import file_rules
from seed_agents.protocol.wire.errors import ProtocolError

from ..store import attachments as attachments_q
from ..store import blobs
from ..store import memory as memory_q
from ..store.errors import Refused
from .context import ToolContext, ToolFailure, ToolResult

# A file the model reads is cut to this many bytes (the loop cuts its output again, in characters).
READ_BYTES = 256 * 1024
SEARCH_DEFAULT = 10


def memory_limits(config) -> memory_q.MemoryLimits:  # noqa: ANN001
    """The operator's bounds on memory (--file-quota-bytes, --memory-max-files): the same for the
    agent's own writes as for the memory actions."""
    if config is None:
        return memory_q.MemoryLimits()
    return memory_q.MemoryLimits(quota=config.file_quota_bytes or None, max_files=config.memory_max_files)


def memory_path_of(address: str) -> str | None:
    """'' for the root, the normalized path, or None when `address` is not a memory address."""
    if address in ("~/memory", "~/memory/"):
        return ""
    if not address.startswith("~/memory/"):
        return None
    try:
        return file_rules.memory_path(address[len("~/memory/"):])
    except (ProtocolError, Refused) as exc:
        raise ToolFailure(exc.message) from None


async def read(ctx: ToolContext, path: str) -> ToolResult:
    agent_id = ctx.agent["id"]

    def job(conn):
        info = memory_q.file_info(conn, agent_id, path) if path else None
        if info is None:
            return "dir", memory_q.list_dir(conn, agent_id, path or None)
        data = blobs.read_range(conn, info.blob_id, 0, min(info.size, READ_BYTES))
        return "file", (info, data)

    try:
        kind, value = await ctx.db.aread(job, large=True)   # (a file's bytes: off the event loop)
    except (ProtocolError, Refused) as exc:
        if not path and exc.status == 404:
            value, kind = {"path": "", "entries": [], "totalBytes": 0}, "dir"
        else:
            raise ToolFailure(exc.message) from None
    if kind == "dir":
        entries = [{"path": e["path"], "type": e["type"], "size": e["size"]} for e in value["entries"]]
        where = f"{path}/" if path else "Memory root"
        return ToolResult({"summary": f"{where}: {len(entries)} entries.", "path": path, "entries": entries})
    info, data = value
    text = file_rules.utf8_or_none(data) if info.is_text else None
    if text is None and info.is_text and len(data) < info.size:
        text = data.decode("utf-8", "ignore")   # cut inside a character: drop the broken end
    if text is None:
        return ToolResult({"summary": f"{path} is a binary file of {info.size} bytes: not shown.",
                           "path": path, "size": info.size,
                           **({"mimeType": m} if (m := file_rules.infer_mime_type(path)) else {})})
    out: dict = {"summary": f"Read {path} ({info.size} bytes).", "path": path, "content": text}
    if len(data) < info.size:
        out["truncated"] = True
        out["summary"] += f" Only its first {len(data)} bytes are shown."
    return ToolResult(out)


async def file_bytes(ctx: ToolContext, path: str) -> bytes:
    """A memory file's whole content (an IPFS upload's), ToolFailure when there is none."""
    agent_id = ctx.agent["id"]

    def job(conn):
        info = memory_q.file_info(conn, agent_id, path)
        if info is None:
            raise ProtocolError(404, f"no file at ~/memory/{path}")
        return blobs.read_range(conn, info.blob_id, 0, info.size)

    try:
        return await ctx.db.aread(job, large=True)
    except (ProtocolError, Refused) as exc:
        raise ToolFailure(exc.message) from None


async def attachment_bytes(ctx: ToolContext, attachment_id: str) -> tuple[dict, bytes]:
    """(its metadata, its bytes) of an attachment of this session."""
    try:
        return await ctx.db.aread(attachments_q.read, ctx.session_id, attachment_id,
                                  file_rules.MAX_SESSION_ATTACHMENT_BYTES, large=True)
    except (ProtocolError, Refused) as exc:
        raise ToolFailure(exc.message) from None


async def write(ctx: ToolContext, path: str, params: dict, *, data: bytes | None = None) -> ToolResult:
    """`write ~/memory/<path>`; `data` given: those bytes (a fetched IPFS file)."""
    if not path:
        raise ToolFailure("write needs a file path under ~/memory/")
    options = params.get("options") if isinstance(params.get("options"), dict) else {}
    unknown = set(options) - {"delete", "fromUrl", "fromAttachment"}
    if unknown:
        raise ToolFailure(f"unknown option(s) for a memory write: {', '.join(sorted(unknown))}")
    agent_id, account = ctx.agent["id"], ctx.account
    now = ctx.now_ms()
    if data is None and options.get("delete") is True:
        removed = await ctx.db.write(lambda conn: memory_q.delete_path(conn, agent_id, path))
        if not removed:
            raise ToolFailure(f"nothing at ~/memory/{path} to delete")
        return ToolResult({"summary": f"Deleted ~/memory/{path}.", "path": path, "deleted": True})
    if data is not None:
        pass
    elif isinstance(options.get("fromUrl"), str):
        if ctx.web is None:
            raise ToolFailure("downloading a URL is not available on this server")
        final, _, data, cut = await ctx.web.fetch(options["fromUrl"], ctx.authority.account)
        if cut:
            raise ToolFailure(f"{final} is larger than this server downloads for an agent (--tool-fetch-bytes)")
    elif isinstance(options.get("fromAttachment"), str):
        attachment_id = options["fromAttachment"]
        try:
            _, data = await ctx.db.aread(attachments_q.read, ctx.session_id, attachment_id,
                                         file_rules.MAX_SESSION_ATTACHMENT_BYTES, large=True)
        except (ProtocolError, Refused) as exc:
            raise ToolFailure(exc.message) from None
    elif isinstance(params.get("content"), str):
        data = params["content"].encode()
    else:
        raise ToolFailure("a memory write needs `content` (or options fromUrl / fromAttachment / delete)")
    limits = memory_limits(ctx.config)
    try:
        entry = await ctx.db.write(lambda conn: memory_q.write_file(conn, agent_id, account, path, data, now, limits))
    except (ProtocolError, Refused) as exc:
        raise ToolFailure(exc.message) from None
    return ToolResult({"summary": f"Wrote ~/memory/{path} ({len(data)} bytes).", "path": path,
                       "size": entry.get("size", len(data))})


# Memory search is this server's own callable (the registry's `search` searches Seed): its name,
# its line in the `call` verb's description, and its input {query, pageSize?}.
SEARCH_MEMORY = "search_memory"
SEARCH_MEMORY_DESCRIPTION = (f"{SEARCH_MEMORY} — Search your persistent memory files, full text: input "
                             "{query, pageSize?}; results are ~/memory/ addresses you can read.")


def search_input(value: object) -> dict:
    if not isinstance(value, dict) or not isinstance(value.get("query"), str) or not value["query"].strip():
        raise ToolFailure(f"{SEARCH_MEMORY} takes {{query: string, pageSize?: integer}}")
    size = value.get("pageSize")
    out: dict = {"query": value["query"]}
    if isinstance(size, int) and not isinstance(size, bool):
        out["pageSize"] = max(1, min(50, size))
    return out


async def search(ctx: ToolContext, params: dict) -> ToolResult:
    limit = params.get("pageSize") if isinstance(params.get("pageSize"), int) else SEARCH_DEFAULT
    found = await ctx.db.aread(memory_q.search, ctx.agent["id"], params["query"], limit, large=True)
    results = [{"title": r["path"], "url": f"~/memory/{r['path']}", "snippet": r["snippet"], "score": r["score"]}
               for r in found]
    markdown = "\n".join(f"- ~/memory/{r['path']} — {r['snippet']}" for r in found)
    summary = (f"{len(results)} memory files match \"{params['query']}\"." if results
               else f"No results found for \"{params['query']}\".")
    return ToolResult({"summary": summary, "results": results, "markdown": markdown})


async def read_attachment(ctx: ToolContext, attachment_id: str) -> ToolResult:
    try:
        meta, data = await ctx.db.aread(attachments_q.read, ctx.session_id, attachment_id, READ_BYTES, 0,
                                        READ_BYTES, large=True)
    except (ProtocolError, Refused) as exc:
        raise ToolFailure(exc.message) from None
    text = file_rules.utf8_or_none(data)
    if text is None and len(data) == READ_BYTES:
        text = data.decode("utf-8", "ignore") if file_rules.utf8_or_none(data[:1024]) is not None else None
    if text is None:
        return ToolResult({"summary": f"Attachment {meta.get('name', attachment_id)} is binary "
                                      f"({meta['size']} bytes): not shown.", "attachment": meta})
    out = {"summary": f"Read attachment {meta.get('name', attachment_id)} ({meta['size']} bytes).",
           "attachment": meta, "content": text}
    if meta["size"] > len(data):
        out["truncated"] = True
    return ToolResult(out)
