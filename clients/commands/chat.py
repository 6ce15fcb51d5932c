"""`chat`: an interactive conversation. Creates what is missing (a key, an echo agent, a
session), then reads lines and streams each reply token by token.

On a terminal, lines are read with the standard `readline` (arrow keys, Ctrl-R, history kept in
`~/.config/seed-agents/chat_history`), `/help` lists the chat commands, and `…` shows while the
first token of a reply is awaited. Piped input is read plainly, with no prompt or indicator, so
scripts get only the replies on stdout.
"""
from __future__ import annotations

import asyncio
import queue
import sys
import threading
import time
from pathlib import Path

from protocol.keys import Keypair

from clients.commands.common import CliError, checked_url, explain, open_client, say
from clients.commands.reply import send_message, stream_reply
from clients.commands.send import finish_reply, write_out
from clients.errors import AgentsError
from clients.keyfile import KeyFileError, read_key, resolve_key_path, write_key

CHAT_AGENT = {"name": "chat", "systemPrompt": "You are a helpful assistant.",
              "modelProvider": "echo", "model": "echo"}
PROMPT = "you> "
THINKING, ERASE = "…", "\b \b"
HISTORY_SIZE = 1000
HELP = """chat commands:
  /help       this list
  /new        start a new session with the same agent
  /agent ID   switch to the agent ID (in a new session)
  /quit       leave (Ctrl-D too)
Up/Down recall earlier lines; Left/Right, Home/End and Ctrl-R edit and search them."""


class LineReader:
    """Lines without blocking the event loop. A daemon thread reads one line when asked (so a
    prompt appears only once the reply is done), because a blocking read cannot be cancelled
    and must not keep the process alive after /quit or Ctrl-C."""

    def __init__(self, interactive: bool, history: Path | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._asks: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.interactive = interactive
        self._history = history
        if interactive:
            self._readline = _load_readline(history)
        threading.Thread(target=self._pump, name="stdin", daemon=True).start()

    def _read(self) -> str | None:
        if not self.interactive:
            return sys.stdin.readline() or None
        try:
            return input(PROMPT)   # readline edits the line, with history
        except EOFError:
            return None

    def _pump(self) -> None:
        while True:
            self._asks.get()
            line = self._read()
            try:
                self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
            except RuntimeError:
                return  # the loop is gone: chat has ended
            if line is None:
                return

    async def get(self) -> str | None:
        self._asks.put(None)
        return await self._lines.get()

    def save(self) -> None:
        if self.interactive and self._readline is not None and self._history is not None:
            try:
                self._history.parent.mkdir(parents=True, exist_ok=True)
                self._readline.write_history_file(str(self._history))
            except OSError:
                pass  # history is a comfort, never a reason to fail


def _load_readline(history: Path | None):
    try:
        import readline
    except ImportError:  # a Python built without it: plain input() still works
        return None
    readline.set_history_length(HISTORY_SIZE)
    if history is not None:
        try:
            readline.read_history_file(str(history))
        except OSError:
            pass
    return readline


def history_path() -> Path:
    return Path.home() / ".config" / "seed-agents" / "chat_history"


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


class Conversation:
    """The agent and session being talked to, and the subscription that streams replies."""

    def __init__(self, client, agent_id: str) -> None:
        self.client = client
        self.agent_id = agent_id
        self.session_id = ""
        self.sub = None

    async def new_session(self) -> None:
        if self.sub is not None:
            await self.sub.close()
        title = time.strftime("chat %Y-%m-%d %H:%M")
        self.session_id = (await self.client.create_session(self.agent_id, title=title))["sessionId"]
        self.sub = await self.client.subscribe(f"sessions/{self.session_id}", after_seq=0)
        say(f"agent {self.agent_id}, session {self.session_id}. Type a message; /help lists "
            "the commands, /quit or Ctrl-D leaves.")

    async def turn(self, text: str, interactive: bool, url: str) -> None:
        try:
            sent = await send_message(self.client, self.session_id, text)
        except AgentsError as exc:
            if exc.status != 0 and exc.status != 429:
                raise
            say(explain(exc, url))
            return
        streamed: list[str] = []
        if interactive:
            write_out(THINKING)   # erased by the first token

        def write(piece: str) -> None:
            if interactive and not streamed:
                write_out(ERASE)
            streamed.append(piece)
            write_out(piece)

        reply = await stream_reply(self.sub, sent, write)
        if interactive and not streamed:
            write_out(ERASE)
        finish_reply(reply, streamed)


async def command(conv: Conversation, line: str) -> bool:
    """Run a /command; False when it is /quit."""
    name, _, rest = line.strip().partition(" ")
    if name == "/quit":
        return False
    if name == "/help":
        say(HELP)
    elif name == "/new":
        await conv.new_session()
    elif name == "/agent" and rest.strip():
        try:
            await conv.client.get_agent(rest.strip())
        except AgentsError as exc:
            say(explain(exc, conv.client.url))
            return True
        conv.agent_id = rest.strip()
        await conv.new_session()
    else:
        say(f"unknown chat command {line.strip()!r}; /help lists them")
    return True


async def chat(args) -> int:
    interactive = sys.stdin.isatty()
    url = checked_url(args)

    def on_state(state: str, detail: str) -> None:
        say(f"[{'connection lost: ' + detail + '; reconnecting' if state == 'disconnected' else 'reconnected'}]")

    async with open_client(args, keypair=_key(args), on_state=on_state) as client:
        conv = Conversation(client, await _agent(client, args.agent))
        await conv.new_session()
        lines = LineReader(interactive, history_path() if interactive else None)
        try:
            while True:
                line = await lines.get()
                if line is None:
                    if interactive:
                        write_out("\n")
                    return 0
                text = line.rstrip("\r\n")
                if not text.strip():
                    continue
                if text.startswith("/") and not text.startswith("//"):
                    if not await command(conv, text):
                        return 0
                    continue
                # The thinking mark is drawn only on a terminal, never into a pipe.
                await conv.turn(text[1:] if text.startswith("//") else text,
                                interactive and sys.stdout.isatty(), url)
        finally:
            lines.save()


def register(sub, common) -> None:
    p = sub.add_parser("chat", parents=[common], help="talk to an agent interactively",
                       description="Chat with an agent: creates a key, an echo agent and a session "
                                   "when missing, then reads lines and streams each reply. On a "
                                   "terminal: line editing and history (readline), /help, /new, "
                                   "/agent ID; /quit or Ctrl-D exits. A line starting with // "
                                   "sends the text after the first /.")
    p.add_argument("--agent", default=None, metavar="ID", help="chat with this agent "
                   "(default: your agent named 'chat', created with the echo provider if missing)")
    p.set_defaults(run=chat)
