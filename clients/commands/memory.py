"""`memory ls/cat/put/rm/search AGENT ...`: an agent's memory files from the command line.

`put` sends a file of up to 2 MiB in one WriteAgentMemoryFile and a larger one in chunks (as the
desktop does); `cat` reads a file larger than one answer in ranges; neither holds more than a
chunk of the file in memory.
"""
from __future__ import annotations

import mimetypes
import os
import sys

from .. import actions
from ..render import as_json, table
from .common import CliError, open_client, say
from .resolve import agent_id

SINGLE_SHOT_BYTES = 2 * 1024 * 1024   # the desktop's threshold for a chunked upload
RANGE_BYTES = 8 * 1024 * 1024
AGENT_HELP = "the agent's name, id, or the start of its id"


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


async def ls(args) -> int:
    async with open_client(args) as client:
        listed = await client.list_agent_memory(await agent_id(client, args.agent))
    prefix = args.path.strip("/") + "/" if args.path else ""
    entries = [e for e in listed["entries"] if not prefix or e["path"].startswith(prefix)]
    if args.path and not entries:
        raise CliError(f"nothing in memory under {args.path}")
    if args.json:
        print(as_json(entries))
        return 0
    if not entries:
        say("this agent's memory is empty: `seed-agents memory put AGENT PATH FILE` writes a file")
        return 0
    rows = [["" if e["type"] == "dir" else _human(e["size"]), e["path"] + ("/" if e["type"] == "dir" else "")]
            for e in entries]
    print(table(["SIZE", "PATH"], rows))
    files = [e for e in entries if e["type"] == "file"]
    where = f" under {args.path.strip('/')}/" if args.path else ""
    say(f"{_human(sum(e['size'] for e in files))} in {len(files)} file{'' if len(files) == 1 else 's'}{where}")
    return 0


async def cat(args) -> int:
    out = sys.stdout.buffer
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent)
        first = (await client.call(actions.read_agent_memory_file(agent, args.path, 0, RANGE_BYTES)))["file"]
        size = first["size"]
        data = first.get("data")
        data = data if data is not None else first.get("content", "").encode()
        out.write(data)
        offset = len(data)
        while offset < size:
            part = (await client.call(actions.read_agent_memory_file(agent, args.path, offset, RANGE_BYTES)))
            piece = part["file"].get("data") or b""
            if not piece:
                break
            out.write(piece)
            offset += len(piece)
    out.flush()
    return 0


async def put(args) -> int:
    source = args.file
    if source in (None, "-"):
        data = sys.stdin.buffer.read()
        return await _put_bytes(args, data)
    try:
        size = os.path.getsize(source)
        handle = open(source, "rb")
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror}") from None
    with handle:
        if size <= SINGLE_SHOT_BYTES:
            return await _put_bytes(args, handle.read())
        async with open_client(args) as client:
            agent = await agent_id(client, args.agent)
            done = await client.upload_file({"kind": "memory", "agentId": agent, "path": args.path}, handle,
                                            size, chunk_bytes=RANGE_BYTES)
    print(f"{done['entry']['path']}: {done['entry']['size']} bytes")
    return 0


async def _put_bytes(args, data: bytes) -> int:
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent)
        if len(data) <= SINGLE_SHOT_BYTES:
            entry = (await client.write_agent_memory_file(agent, args.path, data))["entry"]
        else:
            entry = (await client.upload_file({"kind": "memory", "agentId": agent, "path": args.path}, data,
                                              chunk_bytes=RANGE_BYTES))["entry"]
    print(f"{entry['path']}: {entry['size']} bytes")
    return 0


async def rm(args) -> int:
    async with open_client(args) as client:
        gone = await client.delete_agent_memory_file(await agent_id(client, args.agent), args.path)
    if not gone["deleted"]:
        raise CliError(f"nothing in memory at {gone['path']}")
    print(f"deleted {gone['path']}")
    return 0


async def search(args) -> int:
    async with open_client(args) as client:
        found = (await client.search_agent_memory(await agent_id(client, args.agent), args.query,
                                                  args.limit))["results"]
    if not found:
        print("no match", file=sys.stderr)
        return 1
    for r in found:
        print(f"{r['path']}  ({r['score']:.3f})")
        print(f"    {' '.join(r['snippet'].split())}")
    return 0


async def upload_attachment(client, session_id: str, path: str) -> dict:
    """Attach the file at `path` to the session (in chunks when over 2 MiB); its info."""
    try:
        size = os.path.getsize(path)
        handle = open(path, "rb")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    name = os.path.basename(path)
    mime = mimetypes.guess_type(name)[0]
    with handle:
        if size <= SINGLE_SHOT_BYTES:
            return (await client.upload_session_attachment(session_id, name, handle.read(), mime))["attachment"]
        target = {"kind": "session-attachment", "sessionId": session_id, "name": name, "mimeType": mime}
        return (await client.upload_file(target, handle, size, chunk_bytes=RANGE_BYTES))["attachment"]


def register(sub, common) -> None:
    p = sub.add_parser("memory", help="an agent's memory files: ls, cat, put, rm, search",
                       description="Read and change an agent's memory (the desktop's Memory tab).")
    msub = p.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    q = msub.add_parser("ls", parents=[common], help="list files (under PATH)")
    q.add_argument("agent", metavar="AGENT", help=AGENT_HELP)
    q.add_argument("path", metavar="PATH", nargs="?")
    q.add_argument("--json", action="store_true", help="print the entries as JSON, as the server gave them")
    q.set_defaults(run=ls)
    q = msub.add_parser("cat", parents=[common], help="print a file's bytes")
    q.add_argument("agent", metavar="AGENT", help=AGENT_HELP)
    q.add_argument("path", metavar="PATH")
    q.set_defaults(run=cat)
    q = msub.add_parser("put", parents=[common], help="write a file from FILE (or stdin)")
    q.add_argument("agent", metavar="AGENT", help=AGENT_HELP)
    q.add_argument("path", metavar="PATH")
    q.add_argument("file", metavar="FILE", nargs="?", help="a local file; `-` or nothing: stdin")
    q.set_defaults(run=put)
    q = msub.add_parser("rm", parents=[common], help="delete a file, or a directory with all under it")
    q.add_argument("agent", metavar="AGENT", help=AGENT_HELP)
    q.add_argument("path", metavar="PATH")
    q.set_defaults(run=rm)
    q = msub.add_parser("search", parents=[common], help="full-text search over the text files")
    q.add_argument("agent", metavar="AGENT", help=AGENT_HELP)
    q.add_argument("query", metavar="QUERY")
    q.add_argument("--limit", type=int, default=20, help="at most this many results (1-50)")
    q.set_defaults(run=search)
