"""The README, followed word for word: its tour and every code block, in a fresh copy of this
tree with a fresh HOME, against the server `make run` starts there.

Each ```sh line that is a command of the README (`make run`, `.venv/bin/seed-agents ...`,
`curl ...`, `eval ...`, `read -rs VAR && export VAR`) is run as written; the lines shown under
it (`# ...` comments, or plain lines) are what it must print, where a word holding a digit or
`…` (an id, a time) stands for any word. `you> TEXT` lines are typed into `chat`. The Python
example runs twice in a row, from a folder outside the checkout (as a person's script would).
Four things differ from a person's run, so that runs on one machine never collide, nothing
already running there gets in the way, and nothing is installed twice: the ports, chosen free
(SEED_AGENTS_HTTP_PORT and SEED_AGENTS_URL, which the README documents, the URLs of the example
and of `curl`, and the local Ollama's: a `--type ollama` provider is given `--base-url` on a free
port, so a real Ollama on 11434 changes nothing); the server offline
(SEED_AGENTS_HM_SERVER_URL='', as the README says; a person's talks to the public Seed gateway);
and the copy's `.venv`, this tree's own, whose
editable install runs this tree's files, the same as the copy's (the cold install is measured
apart: docs/operations.md, "Installing").
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.procs import free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OLLAMA_PORT = 11434
COMMAND = re.compile(r"^(make |\.venv/bin/seed-agents|curl |eval |read -rs )")


def code_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of each fenced block, in order."""
    return [(m.group(1), m.group(2).splitlines())
            for m in re.finditer(r"^```(\w+)\n(.*?)^```$", text, re.S | re.M)]


def steps(lines: list[str]) -> list[tuple[str, list[str], list[str]]]:
    """(command, typed lines, shown lines) for each command of a shell block."""
    out: list[tuple[str, list[str], list[str]]] = []
    for line in lines:
        if COMMAND.match(line):
            out.append((line, [], []))
        elif out and line.startswith("you> "):
            out[-1][1].append(line[len("you> "):])
        elif out and line.strip():
            out[-1][2].append(line[2:] if line.startswith("# ") else line)
    return out


def without_comment(command: str) -> str:
    return re.sub(r"\s+#\s.*$", "", command)


def matches(shown: str, printed: str) -> bool:
    """Word for word, where a shown word with a digit or `…` stands for any one word; a shown
    JSON object must have the same keys."""
    if shown.startswith("{"):
        try:
            return set(json.loads(printed)) == set(json.loads(shown))
        except ValueError:
            return False
    want, got = shown.split(), printed.split()
    return len(want) == len(got) and all(
        w == g or re.search(r"[0-9…]", w) for w, g in zip(want, got))


def fresh_copy(dest: Path) -> None:
    """This tree's files as a clone has them (tracked and new, not ignored), times kept, and
    this tree's .venv beside them."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")


@pytest.fixture
def tour(tmp_path):
    if not (ROOT / ".venv" / "bin" / "seed-agents").exists():
        pytest.skip("no .venv in this tree (make .venv/.installed makes it)")
    clone = tmp_path / "seed-agents"
    clone.mkdir()
    fresh_copy(clone)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEED_AGENTS_") and k != "PYTHONPATH"}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "home" / ".local" / "share"),
               XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"), TERM="xterm",
               SEED_AGENTS_HTTP_PORT=str(port), SEED_AGENTS_URL=f"http://127.0.0.1:{port}",
               SEED_AGENTS_HM_SERVER_URL="")   # offline: no test reaches beyond 127.0.0.1
    env.pop("INPUTRC", None)
    state = {"clone": clone, "env": env, "port": port, "server": None, "transcript": []}
    # Something on Ollama's default port (a running Ollama, as the README suggests): the tour must
    # not depend on it. A listener that never answers, when the port is free to take.
    squatter = socket.socket()
    try:
        squatter.bind(("127.0.0.1", OLLAMA_PORT))
        squatter.listen(16)
    except OSError:
        pass   # something listens there already
    try:
        yield state
    finally:
        squatter.close()
    server = state["server"]
    if server is not None and server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)


def start_make_run(state) -> str:
    # `-o`: the stamp counts as up to date, so the copy's make uses the .venv as it is.
    server = subprocess.Popen(["make", "-o", ".venv/.installed-run", "run"], cwd=state["clone"], env=state["env"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    state["server"] = server
    deadline = time.monotonic() + 30
    seen = []
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip())
        if "listening on" in line:
            return line.rstrip()
    raise AssertionError(f"make run did not start: {seen}")


def run_command(state, command: str, stdin: str = "") -> tuple[int, str, str]:
    proc = subprocess.run(["bash", "-c", without_comment(command)], cwd=state["clone"], env=state["env"],
                          input=stdin, capture_output=True, text=True, timeout=30)
    return proc.returncode, proc.stdout, proc.stderr


def chat_on_a_terminal(state, command: str, typed: list[str], shown: list[str]) -> tuple[str, list[str]]:
    """The README's chat: the header it shows, then each typed line and its reply. Returns the
    session id and what the screen showed."""
    import pexpect

    child = pexpect.spawn("bash", ["-c", without_comment(command)], cwd=str(state["clone"]), env=state["env"],
                          encoding="utf-8", timeout=20, dimensions=(40, 250))
    try:
        child.expect(r"(agent \S+, a new session \(made when you send a message\)\. Type a message;[^\r\n]*)\r\n")
        header = child.match.group(1)
        assert matches(shown[0], header), (shown[0], header)
        screen = [header]
        session = None
        expected = list(shown[1:])
        for text in typed:
            child.expect_exact("you> ")
            child.send(text + "\r")
            screen.append(f"you> {text}")
            if expected and expected[0].startswith("[session "):   # the first message makes the session
                child.expect(r"\[session (\S+)\]")
                session = child.match.group(1)
                assert matches(expected.pop(0), child.match.group(0))
                screen.append(child.match.group(0))
            reply = expected.pop(0)
            child.expect(r"\r\n([^\r\n]*" + re.escape(reply.split()[-1]) + r")\r\n")
            printed = child.match.group(1).replace("…\b \b", "")
            assert matches(reply, printed), child.match.group(1)
            screen.append(printed)
        assert session is not None, "the chat named no session"
        child.expect_exact("you> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    return session, screen


def tail_lines(state, command: str, shown: list[str]) -> list[str]:
    proc = subprocess.Popen(["bash", "-c", "exec " + without_comment(command)], cwd=state["clone"], env=state["env"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        printed = [proc.stdout.readline().rstrip("\n") for _ in shown]
    finally:
        proc.send_signal(signal.SIGINT)   # tail follows until Ctrl-C
        assert proc.wait(20) == 0
    return printed


def test_the_readme_word_for_word(tour):
    text = README.read_text(encoding="utf-8")
    blocks = code_blocks(text)
    state = tour
    transcript = state["transcript"]
    session = None
    started = False
    for language, lines in blocks:
        if language == "python":
            code = "\n".join(lines).replace("127.0.0.1:3050", f"127.0.0.1:{state['port']}")
            elsewhere = state["clone"].parent / "elsewhere"   # a script of the person's, not in the checkout
            elsewhere.mkdir(exist_ok=True)
            for attempt in (1, 2):   # twice in a row: fresh ids each time
                proc = subprocess.run([str(state["clone"] / ".venv/bin/python"), "-c", code], cwd=elsewhere,
                                      env=state["env"], capture_output=True, text=True, timeout=60)
                assert (proc.returncode, proc.stdout) == (0, "echo: hello\n"), (attempt, proc.stderr)
                transcript.append(f"$ python3 README-example.py   # run {attempt}\n{proc.stdout.rstrip()}")
            continue
        assert language == "sh", language
        for command, typed, shown in steps(lines):
            if command.startswith("make test"):
                continue   # the suite this test is part of
            if command.startswith("make run"):
                if not started:
                    line = start_make_run(state)
                    started = True
                    transcript.append(f"$ make run\n{line.split(' INFO ', 1)[-1]}")
                    assert line.endswith(f"database {state['clone']}/data/agents.sqlite, new database)"), line
                continue
            if command.startswith("read -rs "):
                name = command.split()[2]
                state["env"][name] = f"test-key-for-{name}"   # what the person pastes
                continue
            command = command.replace("127.0.0.1:3050", f"127.0.0.1:{state['port']}")
            if "--type ollama" in command:   # its default URL, localhost:11434, may have an Ollama behind it
                command = without_comment(command) + f" --base-url http://localhost:{free_port()}/v1"
            if session is not None:
                command = command.replace("9b1e", session[:4])   # the id prefix the README abbreviates
            if " chat" in command and typed:
                session, screen = chat_on_a_terminal(state, command, typed, shown)
                transcript.append(f"$ {command}\n" + "\n".join(screen))
                continue
            if " tail " in command:
                printed = tail_lines(state, command, shown)
                transcript.append(f"$ {command}\n" + "\n".join(printed))
            else:
                code, out, err = run_command(state, command, stdin="hi\n" if " chat" in command else "")
                transcript.append(f"$ {command}\n{(out + ('' if command.startswith('curl') else err)).rstrip()}")
                if " chat" in command:   # a real model's chat: here the model is not running
                    assert code == 0 and "the agent failed" in err, err
                    continue
                assert code == 0, (command, err)
                printed = out.splitlines()
            if shown and not shown[0].startswith("{"):
                assert len(printed) >= len(shown), (command, printed)
            for want, got in zip(shown, printed):
                assert matches(want, got), (command, want, got)
    assert started and session is not None
    # The server's front page names what the README's desktop section says to paste.
    page = httpx.get(f"http://127.0.0.1:{state['port']}/", headers={"Accept": "application/json"}).json()
    assert page["desktop"]["url"] == f"http://127.0.0.1:{state['port']}"
    out = Path(os.environ.get("SEED_AGENTS_TOUR_TRANSCRIPT", "")) if os.environ.get("SEED_AGENTS_TOUR_TRANSCRIPT") else None
    if out is not None:
        out.write_text("\n\n".join(transcript) + "\n", encoding="utf-8")
