"""Agent memory actions: List/Read/Write/DeleteAgentMemoryFile, SearchAgentMemory (ours), and
UploadAgentMemoryFileToIpfs. Readers read, writers write (CONTRACT section 4); the files are the
owner's, so a writer's write counts against the owner's quota.

DownloadAgentMemoryFile is in server/handlers/memory_download.py; chunked uploads into memory in
server/handlers/uploads.py.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError

from ..store import blobs
from ..store import memory as memory_q
from ..store import owners as owners_q
from ..tools.memory_tools import memory_limits
from .access import READER, WRITER, agent_access
from .context import HandlerContext


def limits(ctx: HandlerContext) -> memory_q.MemoryLimits:
    return memory_limits(ctx.config)   # (the agent's own writes are bounded the same way)


def owner_of(conn, agent_id: str) -> str:
    return owners_q.agent_access(conn, agent_id)[0]


def memory_changed(ctx: HandlerContext, conn_owner: str, agent_id: str) -> None:
    """The reference's account notice, so Memory tabs open elsewhere refresh."""
    ctx.broadcaster.notify_account(conn_owner, "agent-memory-changed", agent_id=agent_id)


async def list_agent_memory(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        agent_access(conn, env.account_id, action.agent_id, READER)
        return memory_q.list_memory(conn, action.agent_id)

    entries, total = await ctx.db.aread(read, large=True)
    return {"_": "ListAgentMemoryResponse", "agentId": action.agent_id, "entries": entries, "totalBytes": total}


async def read_agent_memory_file(ctx: HandlerContext, env, action) -> dict:
    cap = ctx.config.file_answer_bytes

    def read(conn):
        agent_access(conn, env.account_id, action.agent_id, READER)
        if action.offset is None and action.length is None:
            return memory_q.read_file(conn, action.agent_id, action.path, cap)
        info = memory_q.file_info(conn, action.agent_id, action.path)
        if info is None:
            raise ProtocolError(404, f"Memory file not found: {action.path}")
        offset = action.offset or 0
        length = min(cap, max(0, info.size - offset) if action.length is None else action.length)
        return memory_q.file_value(info, blobs.read_range(conn, info.blob_id, offset, length), offset)

    file = await ctx.db.aread(read, large=True)
    return {"_": "ReadAgentMemoryFileResponse", "agentId": action.agent_id, "file": file}


async def write_agent_memory_file(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()

    def job(conn):
        agent_access(conn, env.account_id, action.agent_id, WRITER)
        owner = owner_of(conn, action.agent_id)
        return owner, memory_q.write_file(conn, action.agent_id, owner, action.path, action.content, now, limits(ctx))

    owner, entry = await ctx.db.write(job)
    memory_changed(ctx, owner, action.agent_id)
    return {"_": "WriteAgentMemoryFileResponse", "agentId": action.agent_id, "entry": entry}


async def delete_agent_memory_file(ctx: HandlerContext, env, action) -> dict:
    def job(conn):
        agent_access(conn, env.account_id, action.agent_id, WRITER)
        return owner_of(conn, action.agent_id), memory_q.delete_path(conn, action.agent_id, action.path)

    owner, deleted = await ctx.db.write(job)
    if deleted:
        memory_changed(ctx, owner, action.agent_id)
    return {"_": "DeleteAgentMemoryFileResponse", "agentId": action.agent_id, "path": action.path,
            "deleted": deleted}


async def search_agent_memory(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        agent_access(conn, env.account_id, action.agent_id, READER)
        return memory_q.search(conn, action.agent_id, action.query, action.limit or 20)

    results = await ctx.db.aread(read, large=True)
    return {"_": "SearchAgentMemoryResponse", "agentId": action.agent_id, "query": action.query,
            "results": results}


MAX_IPFS_BYTES = 64 << 20   # a file published as UnixFS is built in memory (protocol/hm/unixfs.py)


async def upload_agent_memory_file_to_ipfs(ctx: HandlerContext, env, action) -> dict:
    """The file as UnixFS blocks, published with `PublishBlobs` to the HM server
    (`--hm-server-url`); its root CID and `ipfs://` URL, as the reference answers."""
    hm_url = getattr(ctx.config, "hm_server_url", None)

    def read(conn):
        agent_access(conn, env.account_id, action.agent_id, WRITER)
        info = memory_q.file_info(conn, action.agent_id, action.path)
        if info is None:
            raise ProtocolError(404, f"Memory file not found: {action.path}")
        if not hm_url:
            return info, None
        if info.size > MAX_IPFS_BYTES:
            raise ProtocolError(413, f"Memory file {action.path} is {info.size} bytes; at most {MAX_IPFS_BYTES} "
                                     "are published to IPFS")
        return info, blobs.read_range(conn, info.blob_id)

    info, data = await ctx.db.aread(read, large=True)
    if not hm_url:
        raise ProtocolError(501, "UploadAgentMemoryFileToIpfs needs a Seed hypermedia server to publish through, "
                                 "and this server has none (--hm-server-url); the file stays in memory")
    from ..hypermedia.client import HmClient, HmError

    client = HmClient(hm_url, ctx.runtime.hm_http, timeout=getattr(ctx.config, "hm_server_timeout", 15.0))
    try:
        cid = await client.publish_file(data)
    except HmError as exc:
        raise ProtocolError(502, str(exc)) from None
    out = {"_": "UploadAgentMemoryFileToIpfsResponse", "agentId": action.agent_id, "path": info.path, "cid": cid,
           "url": f"ipfs://{cid}", "size": info.size}
    mime = info.entry().get("mimeType")
    if mime:
        out["mimeType"] = mime
    return out
