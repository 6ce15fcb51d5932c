"""`chat`: an interactive conversation. Creates what is missing (a key, an echo agent, a
session), then reads lines and streams each reply token by token.

On a terminal, lines are read with the standard `readline` (arrow keys, Ctrl-R, history kept in
`~/.config/seed-agents/chat_history`), `/help` lists the chat commands, and `…` shows while the
first token of a reply is awaited. Piped input is read plainly, with no prompt or indicator, so
scripts get only the replies on stdout.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from contextlib import AsyncExitStack
from pathlib import Path

from seed_agents.protocol.wire.keys import Keypair

from ..errors import AgentsError
from ..keyfile import KeyFileError, read_key, resolve_key_path, write_key
from ..render import Renderer
from ..subscription import Subscription
from . import resolve
from .common import CliError, checked_url, explain, open_client, say
from .reply import Screen, finish, follow_run, send_message, write_out

CHAT_AGENT = {"name": "chat", "systemPrompt": "You are a helpful assistant.",
              "modelProvider": "echo", "model": "echo"}
PROMPT = "you> "
THINKING, ERASE = "…", "\b \b"
HISTORY_SIZE = 1000
RESUME_EVENTS = 10   # events shown when `chat --session` goes back to a conversation
HELP = """chat commands:
  /help       this list
  /new        start a new session with the same agent (made when you send its first message)
  /agent NAME switch to the agent NAME (or id, or the start of it), in a new session
  /quit       leave (Ctrl-D, or Ctrl-C twice, too)
Ctrl-C during a reply stops it.
Up/Down recall earlier lines; Left/Right, Home/End and Ctrl-R edit and search them."""


class LineReader:
    """Lines from the person, read on the main thread (so Ctrl-C reaches the prompt as
    KeyboardInterrupt): `input()` with readline on a terminal, plain lines from a pipe."""

    def __init__(self, interactive: bool, history: Path | None) -> None:
        self.interactive = interactive
        self._history = history
        self._readline = _load_readline(history) if interactive else None

    def get(self) -> str | None:
        """The next line, or None at the end of input (Ctrl-D). Ctrl-C raises KeyboardInterrupt."""
        if not self.interactive:
            return sys.stdin.readline() or None
        try:
            return input(PROMPT)   # readline edits the line, with history
        except EOFError:
            return None

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
        agent_id = await resolve.agent_id(client, wanted)
        await client.get_agent(agent_id)  # a clear 404 now rather than at the first message
        return agent_id
    for agent in await resolve.all_agents(client):
        if agent.get("definition", {}).get("name") == CHAT_AGENT["name"]:
            return agent["id"]
    agent_id = (await client.create_agent(dict(CHAT_AGENT)))["agentId"]
    say(f"created an echo agent {agent_id} (name: chat)")
    return agent_id


class Conversation:
    """The agent and session being talked to, and the subscription that streams replies. A new
    session is made only when its first message is sent (a chat left at once leaves nothing
    behind); the server titles it after that message, so sessions can be told apart."""

    def __init__(self, client, agent_id: str, mode: str = "normal") -> None:
        self.client = client
        self.mode = mode                    # how replies are shown (reply.Screen: normal, quiet, json)
        self.agent_id = agent_id
        self.session_id = ""
        self.sub: Subscription | None = None
        self.screen: Screen | None = None   # the turn being shown
        self.marked = False                 # the thinking mark is on screen until the first piece

    def _hello(self, resumed: str = "") -> None:
        where = f"session {self.session_id}{resumed}" if self.session_id else \
            "a new session (made when you send a message)"
        say(f"agent {self.agent_id}, {where}. Type a message; /help lists "
            "the commands, Ctrl-C stops a reply, /quit or Ctrl-D leaves.")

    async def new_session(self) -> None:
        """The next message starts a new session."""
        if self.sub is not None:
            await self.sub.close()
        self.session_id, self.sub = "", None
        self._hello()

    async def _start_session(self) -> None:
        self.session_id = (await self.client.create_session(self.agent_id))["sessionId"]
        self.sub = await self.client.subscribe(f"sessions/{self.session_id}", after_seq=0)
        say(f"[session {self.session_id}]")

    async def resume(self, wanted: str) -> None:
        """Go back to a session: show its last events, then follow it from there."""
        session_id = await resolve.session_id(self.client, wanted)
        recent: list[dict] = []
        after = 0
        while True:
            response = await self.client.get_session(session_id, after_seq=after, limit=1000)
            recent = (recent + response.get("events", []))[-RESUME_EVENTS:]
            if "nextAfterSeq" not in response:
                break
            after = response["nextAfterSeq"]
        self.agent_id = response["session"]["agentId"]
        self.session_id = session_id
        last = recent[-1]["seq"] if recent else 0
        self.sub = await self.client.subscribe(f"sessions/{session_id}", after_seq=last)
        renderer = Renderer()
        for event in recent:
            for line in renderer.lines(event):
                say(line)
        self._hello(f" (resumed: its last {len(recent)} events above)" if recent else " (resumed)")

    async def turn(self, text: str, interactive: bool, url: str) -> None:
        """Send `text` and show its run until it ends: every message, tool call, child and plan."""
        try:
            if not self.session_id or self.sub is None:
                await self._start_session()
            assert self.sub is not None
            after = self.sub.delivered_seq
            sent = await send_message(self.client, self.session_id, text)
        except AgentsError as exc:
            if exc.status != 0 and exc.status != 429:
                raise
            say(explain(exc, url))
            return
        self.marked = interactive
        self.screen = screen = Screen(self.mode, before_first=self._unmark)
        if interactive:
            write_out(THINKING)   # erased by the first thing shown
        outcome = await follow_run(self.client, self.session_id, self.sub, sent, screen, after_seq=after)
        self._unmark()
        finish(outcome, screen)

    def _unmark(self) -> None:
        if self.marked:
            write_out(ERASE)
            self.marked = False

    async def stop(self) -> None:
        """Ctrl-C during a reply: StopSession (the run is canceled at once, nothing more streams),
        and the line tidied: the thinking mark erased, or the cut reply ended."""
        await self.client.stop_session(self.session_id)
        self._unmark()
        if self.screen is not None:
            self.screen.end_line()

    async def command(self, line: str) -> bool:
        """Run a /command; False when it is /quit."""
        name, _, rest = line.strip().partition(" ")
        if name == "/quit":
            return False
        if name == "/help":
            say(HELP)
        elif name == "/new":
            await self.new_session()
        elif name == "/agent" and not rest.strip():
            names = sorted(resolve.agent_name(a) or resolve.short(a["id"]) for a in await resolve.all_agents(self.client))
            say("usage: /agent NAME (a name, an id, or the start of one); yours: " + ", ".join(names))
        elif name == "/agent":
            try:
                agent_id = await resolve.agent_id(self.client, rest.strip())
                await self.client.get_agent(agent_id)
            except AgentsError as exc:
                say(explain(exc, self.client.url))
                return True
            except CliError as exc:
                say(str(exc))
                return True
            self.agent_id = agent_id
            await self.new_session()
        else:
            say(f"unknown chat command {line.strip()!r}; /help lists them")
        return True


class LoopThread:
    """The asyncio loop on a thread of its own: the client lives there, while the main thread
    reads lines and so receives Ctrl-C (a blocking read elsewhere could not be interrupted)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="chat-loop", daemon=True)
        self._thread.start()

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro):
        """Run `coro` on the loop and wait for its result (Ctrl-C here cancels it and re-raises)."""
        future = self.submit(coro)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


async def _open(stack: AsyncExitStack, args, keypair, on_state) -> Conversation:
    client = await stack.enter_async_context(open_client(args, keypair=keypair, on_state=on_state))
    mode = "json" if args.json else "quiet" if args.quiet else "normal"
    if args.session:
        conv = Conversation(client, "", mode)
        await conv.resume(args.session)
    else:
        conv = Conversation(client, await _agent(client, args.agent), mode)
        await conv.new_session()
    return conv


def chat(args) -> int:
    interactive = sys.stdin.isatty()
    url = checked_url(args)
    keypair = _key(args)

    def on_state(state: str, detail: str) -> None:
        say(f"[{'connection lost: ' + detail + '; reconnecting' if state == 'disconnected' else 'reconnected'}]")

    loop = LoopThread()
    stack = AsyncExitStack()
    lines = None
    try:
        conv = loop.run(_open(stack, args, keypair, on_state))
        lines = LineReader(interactive, history_path() if interactive else None)
        interrupted = False   # the last thing the person did was Ctrl-C
        while True:
            try:
                line = lines.get()
            except KeyboardInterrupt:
                write_out("\n")
                if interrupted:
                    return 0   # a second Ctrl-C at the prompt leaves
                say("(Ctrl-C again, /quit or Ctrl-D leaves)")
                interrupted = True
                continue
            interrupted = False
            if line is None:
                if interactive:
                    write_out("\n")
                return 0
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            if text.startswith("/") and not text.startswith("//"):
                if not loop.run(conv.command(text)):
                    return 0
                continue
            try:
                # The thinking mark is drawn only on a terminal, never into a pipe.
                loop.run(conv.turn(text[1:] if text.startswith("//") else text,
                                   interactive and sys.stdout.isatty(), url))
            except KeyboardInterrupt:
                loop.run(conv.stop())
                say("[stopped]")
                interrupted = True
    finally:
        if lines is not None:
            lines.save()
        try:
            loop.run(stack.aclose())
        except (Exception, KeyboardInterrupt):  # noqa: BLE001 - leaving anyway
            pass
        loop.close()


def register(sub, common) -> None:
    p = sub.add_parser("chat", parents=[common], help="talk to an agent interactively",
                       description="Chat with an agent: creates a key, an echo agent and a session "
                                   "when missing, then reads lines and streams each reply. On a "
                                   "terminal: line editing and history (readline), /help, /new, "
                                   "/agent NAME; Ctrl-C stops a reply, Ctrl-C twice, /quit or "
                                   "Ctrl-D exits. A line starting with // sends the text after the "
                                   "first /.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--agent", default=None, metavar="AGENT", help="chat with this agent, by name "
                       "or id (default: your agent named 'chat', created with the echo provider if missing)")
    which.add_argument("--session", default=None, metavar="SESSION", help="go back to this session "
                       "(id, start of its id, or title): its recent events are shown, then the chat goes on")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--quiet", "-q", action="store_true", help="show only each run's final answer")
    how.add_argument("--json", action="store_true", help="print each run's raw events, one JSON object per line")
    p.set_defaults(run=chat)
