"""`chat`: an interactive conversation. Creates what is missing (a key, an echo agent, a
session), then reads lines from stdin and streams each reply token by token."""
from __future__ import annotations

import asyncio
import sys
import threading
import time

from protocol.keys import Keypair

from clients.commands.common import CliError, explain, open_client, say, url_of
from clients.commands.reply import send_message, stream_reply
from clients.commands.send import finish_reply, write_out
from clients.errors import AgentsError
from clients.keyfile import KeyFileError, read_key, resolve_key_path, write_key

CHAT_AGENT = {"name": "chat", "systemPrompt": "You are a helpful assistant.",
              "modelProvider": "echo", "model": "echo"}


class StdinLines:
    """Lines from stdin without blocking the event loop. A daemon thread, because a blocking
    read cannot be cancelled and must not keep the process alive after /quit or Ctrl-C."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        threading.Thread(target=self._pump, name="stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            line = sys.stdin.readline()
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, line or None)
            except RuntimeError:
                return  # the loop is gone: chat has ended
            if not line:
                return

    async def get(self) -> str | None:
        return await self._queue.get()


def _key(args) -> Keypair:
    path = resolve_key_path(args.key)
    if not path.exists():
        keypair = Keypair.generate()
        write_key(path, keypair)
        say(f"no key yet: created {path} (mode 0600) for account {keypair.account_id}")
        return keypair
    try:
        return read_key(path)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None


async def _agent(client, wanted: str | None) -> str:
    if wanted:
        await client.get_agent(wanted)  # a clear 404 now rather than at the first message
        return wanted
    for agent in (await client.list_agents()).get("agents", []):
        if agent.get("definition", {}).get("name") == CHAT_AGENT["name"]:
            return agent["id"]
    agent_id = (await client.create_agent(dict(CHAT_AGENT)))["agentId"]
    say(f"created an echo agent {agent_id} (name: chat)")
    return agent_id


async def chat(args) -> int:
    interactive = sys.stdin.isatty()
    url = url_of(args)

    def on_state(state: str, detail: str) -> None:
        say(f"[{'connection lost: ' + detail + '; reconnecting' if state == 'disconnected' else 'reconnected'}]")

    async with open_client(args, keypair=_key(args), on_state=on_state) as client:
        agent_id = await _agent(client, args.agent)
        session_id = (await client.create_session(agent_id, title=time.strftime("chat %Y-%m-%d %H:%M")))["sessionId"]
        say(f"agent {agent_id}, session {session_id}. Type a message; /quit or Ctrl-D leaves.")
        sub = await client.subscribe(f"sessions/{session_id}", after_seq=0)
        lines = StdinLines()
        while True:
            if interactive:
                write_out("you> ")
            line = await lines.get()
            if line is None or line.strip() == "/quit":
                if line is None and interactive:
                    write_out("\n")
                return 0
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            try:
                sent = await send_message(client, session_id, text)
            except AgentsError as exc:
                if exc.status != 0 and exc.status != 429:
                    raise
                say(explain(exc, url))
                continue
            streamed: list[str] = []

            def write(piece: str) -> None:
                streamed.append(piece)
                write_out(piece)

            finish_reply(await stream_reply(sub, sent, write), streamed)


def register(sub, common) -> None:
    p = sub.add_parser("chat", parents=[common], help="talk to an agent interactively",
                       description="Chat with an agent: creates a key, an echo agent and a session "
                                   "when missing, then reads lines from stdin and streams each "
                                   "reply. /quit or Ctrl-D exits.")
    p.add_argument("--agent", default=None, metavar="ID", help="chat with this agent "
                   "(default: your agent named 'chat', created with the echo provider if missing)")
    p.set_defaults(run=chat)
