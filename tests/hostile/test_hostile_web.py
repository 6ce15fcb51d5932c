"""Hostile pages and slow peers against the web tools and downloads (issue 32, findings 2, 8 and
13), each against a server child process over real sockets, the web a loopback fake the operator
lets the web tools reach (`--web-networks loopback`):

- a page served with `charset=punycode` (a quadratic decode) leaves the server answering;
- a URL httpx cannot parse (`http://0177.0.0.1/`) is a 400 or a tool error, never a 500;
- 110 slow page reads from one account delay neither another account's model turn nor its page
  read (a pool per purpose, a few fetches per account);
- pages of a megabyte of links being converted leave another account's read (by host name)
  working (a bounded pool of worker processes with a share per account, name resolution on
  threads of its own);
- a download that sends a byte now and then is cut at `--download-timeout`, and a person's
  `InvokeSessionTool` at `--tool-timeout`.

Where the finding is about availability, an honest client's latency is measured during the
attack against a quiet baseline, with generous bounds (the machine is shared); the 50 ms p99
budget of a quiet machine is `-m slow` (make stress).
"""
from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.web_server import FakeWeb
from tests.hostile_measure import percentile
from tests.httpraw import CBOR_HEADERS, post
from tests.procs import ServerProcess
from tests.server.runtime.test_tool_loop import agent_session, run_turn
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

LINKS = "<html><body><article><p>" + "".join(
    f'<a href="/p{i}">link {i}</a> ' for i in range(32_000)) + "</p></article></body></html>"   # ~1 MB


def start(tmp_path, *extra: str) -> ServerProcess:
    return ServerProcess(tmp_path / "srv", extra=[
        "--web-networks", "loopback", "--allow-provider-base-url", "true",
        "--rate-limit", "1000", "--rate-burst", "1000", *extra]).start()


def read_action(sid: str, url: str) -> dict:
    return {"_": "InvokeSessionTool", "sessionId": sid, "verb": "read", "input": {"address": url}}


class Honest:
    """Another account's GetSession, timed: a quiet baseline, then samples while something runs."""

    def __init__(self, c: V2Client, kp, sid: str) -> None:
        self.c, self.kp, self.sid = c, kp, sid
        self.samples: list[float] = []
        self._task: asyncio.Task | None = None
        self._stopped = False

    async def once(self) -> float:
        t = time.perf_counter()
        r = await self.c.call(self.kp, {"_": "GetSession", "sessionId": self.sid}, timeout=300)
        assert r["_"] == "GetSessionResponse", r
        return time.perf_counter() - t

    async def quiet(self, n: int = 30) -> list[float]:
        return [await self.once() for _ in range(n)]

    def start(self) -> None:
        async def go() -> None:
            # (A flag too: on 3.11 a cancel that meets an answer arriving can be swallowed.)
            while not self._stopped and len(self.samples) < 20_000:
                self.samples.append(await self.once())
                await asyncio.sleep(0.01)   # the honest client's pace
        self._task = asyncio.create_task(go())

    async def stop(self) -> list[float]:
        assert self._task is not None
        self._stopped = True
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return self.samples


async def two_accounts(srv: ServerProcess):
    """(attacker client, key, session), (honest client, key, session): echo agents."""
    out = []
    for name in ("attacker", "honest"):
        c = await V2Client.open(srv.url)
        kp = keypair(f"web {name}")
        _, sid = await setup_session(c, kp)
        out.append((c, kp, sid))
    return out


# -- finding 2: charsets by name ----------------------------------------------------------------


async def test_a_page_in_punycode_is_read_as_utf8_and_the_server_keeps_answering(tmp_path):
    async with FakeWeb() as web:
        # punycode's decode is quadratic: on the loop this froze the server for many seconds.
        web.page("/p", "a-" + "b" * (192 << 10), "text/html; charset=punycode")
        srv = start(tmp_path)
        try:
            (ac, akp, asid), (hc, hkp, hsid) = await two_accounts(srv)
            honest = Honest(hc, hkp, hsid)
            quiet = await honest.quiet()
            honest.start()
            t = time.perf_counter()
            r = await ac.call(akp, read_action(asid, web.url("/p")), timeout=300)
            took = time.perf_counter() - t
            loud = await honest.stop()
            print(f"\npunycode page of 192 KiB read in {took:.2f} s; honest GetSession p50 "
                  f"{percentile(quiet, 0.5) * 1000:.1f} -> max {max(loud) * 1000:.1f} ms")
            assert r["_"] == "InvokeSessionToolResponse" and "error" not in r, r
            assert "a-bbbb" in str(r["output"])   # read as UTF-8: the text as it was sent
            assert took < 10
            assert max(loud) < max(3.0, 20 * percentile(quiet, 0.5))   # was a freeze of seconds
        finally:
            srv.kill()


def test_only_text_encodings_are_taken_by_name():
    from seed_agents.server.tools.page_text import charset

    for name in ("punycode", "utf-7", "idna", "unicode_escape", "rot13", "zlib", "nonsense", "base64"):
        assert charset(f"text/html; charset={name}") == "utf-8", name
    assert charset("text/html; charset=Shift_JIS") == "shift_jis"
    assert charset('text/plain; charset="ISO-8859-1"') == "iso8859-1"
    assert charset("text/html; charset=windows-1251") == "cp1251"


# -- finding 13: a URL httpx cannot parse ---------------------------------------------------------


async def test_a_url_that_cannot_be_fetched_is_a_clear_error_never_a_500(tmp_path):
    async with FakeWeb() as web:
        web.redirect("/r", "http://0177.0.0.1/")
        srv = start(tmp_path)
        try:
            c = await V2Client.open(srv.url)
            kp = keypair("bad urls")
            agent_id, sid = await setup_session(c, kp)
            r = await c.call(kp, {"_": "DownloadAgentMemoryFile", "agentId": agent_id, "url": "http://0177.0.0.1/"})
            assert r["_"] == "Error" and r["status"] == 400 and "not a URL" in r["message"], r
            r = await c.call(kp, read_action(sid, "http://0177.0.0.1/x"))
            assert r["_"] == "InvokeSessionToolResponse" and "not a URL that can be fetched" in r["error"], r
            # A redirect there: httpx itself refuses the Location (a protocol error): a tool error too.
            r = await c.call(kp, read_action(sid, web.url("/r")))
            assert r["_"] == "InvokeSessionToolResponse" and r["error"].startswith("could not fetch"), r
            await c.close()
            assert "Traceback" not in srv.log.read_text()
        finally:
            srv.kill()


# -- finding 8: pools per purpose, fetches per account, conversion, deadlines ----------------------


async def test_one_accounts_slow_pages_delay_neither_anothers_model_turn_nor_its_read(tmp_path):
    async with FakeWeb() as web, FakeOpenAI() as fake:
        web.hang("/hang")
        srv = start(tmp_path, "--tool-timeout", "40")
        attack: list[asyncio.Task] = []
        try:
            c = await V2Client.open(srv.url)
            kp = keypair("honest modeller")
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            hc = await V2Client.open(srv.url)
            hkp = keypair("honest reader")
            _, hsid = await setup_session(hc, hkp)

            async def turn() -> float:
                t = time.perf_counter()
                _, appends = await run_turn(c, kp, sid, timeout=120)
                assert appends[-1]["event"].get("role") == "assistant", appends[-1]
                return time.perf_counter() - t

            async def page() -> float:
                t = time.perf_counter()
                r = await hc.call(hkp, read_action(hsid, web.url("/page.html")), timeout=120)
                assert "error" not in r and "forked tail" in str(r["output"]), r
                return time.perf_counter() - t

            quiet_turn = min([await turn() for _ in range(3)])
            quiet_page = min([await page() for _ in range(2)])
            akp = keypair("slow pages")
            async with httpx.AsyncClient(limits=httpx.Limits(max_connections=200), timeout=120) as http:
                base = f"http://127.0.0.1:{srv.port}"
                ac = await V2Client.open(srv.url)
                _, asid = await setup_session(ac, akp)
                for _ in range(110):
                    attack.append(asyncio.create_task(post(http, base, sign_envelope(
                        akp, read_action(asid, web.url("/hang")), ts=unique_ts()), headers=CBOR_HEADERS)))
                # Every read under way: today at most 4 fetching and the rest waiting for the
                # account's slots (seed_agents_web_fetches); before, 100 holding the one pool.
                async def under_way() -> bool:
                    if sum(p == "/hang" for _, p in web.requests) >= 100:
                        return True
                    text = (await http.get(base + "/metrics")).text
                    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                               if line.startswith("seed_agents_web_fetches{")) >= 110
                await until(under_way, 30, step=0.1, what="the slow reads under way")
                loud_turn = await turn()
                loud_page = await page()
                hanging = sum(p == "/hang" for _, p in web.requests)
                print(f"\n110 slow reads by one account ({hanging} connected): another's model turn "
                      f"{quiet_turn:.2f} -> {loud_turn:.2f} s, its page read {quiet_page:.2f} -> {loud_page:.2f} s")
                assert loud_turn < 5 + 10 * quiet_turn
                assert loud_page < 5 + 10 * quiet_page
                assert hanging <= 4   # --web-fetches-per-account: the rest wait their turn
                for task in attack:
                    task.cancel()
                await asyncio.gather(*attack, return_exceptions=True)
        finally:
            for task in attack:
                task.cancel()
            srv.kill()


async def test_pages_of_links_leave_another_accounts_read_by_host_name_working(tmp_path):
    async with FakeWeb() as web, FakeWeb() as other:
        web.page("/links", LINKS)
        srv = start(tmp_path, "--tool-timeout", "110")   # no attacker's read ends for its deadline
        attack: list[asyncio.Task] = []
        try:
            (ac, akp, asid), (hc, hkp, hsid) = await two_accounts(srv)

            async def page(site: FakeWeb) -> float:
                # By host name, on a host not yet connected to: the server resolves it (DNS).
                t = time.perf_counter()
                r = await hc.call(hkp, read_action(hsid, f"http://localhost:{site.port}/page.html"), timeout=300)
                assert "error" not in r and "forked tail" in str(r["output"]), r
                return time.perf_counter() - t

            quiet = await page(web)
            honest = Honest(hc, hkp, hsid)
            quiet_get = await honest.quiet()
            for _ in range(12):
                attack.append(asyncio.create_task(ac.call(akp, read_action(asid, web.url("/links")), timeout=300)))
            await until(lambda: sum(p == "/links" for _, p in web.requests) >= 12, 60, what="the link pages fetched")
            honest.start()
            loud = await page(other)
            converted = sum(task.done() for task in attack)
            loud_get = await honest.stop()
            print(f"\n12 reads of a 1 MB link page: another account's read by name {quiet:.2f} -> {loud:.2f} s, "
                  f"done when {converted} of the 12 were; its GetSession p50 {percentile(quiet_get, 0.5) * 1000:.1f}"
                  f" -> {percentile(loud_get, 0.5) * 1000:.1f} ms, p99 {percentile(loud_get, 0.99) * 1000:.1f} ms")
            # It does not wait behind the attacker's pages: the pool is bounded (2 workers) but
            # one account converts one page at a time, and host names resolve on threads of their
            # own. Counted, not timed: the machine is shared. (The code before converted in
            # unbounded threads under the GIL: on this machine the read was not held up, but the
            # honest GetSession p50 went 15 -> 59 ms; here it stays where it was.)
            assert converted <= 3
        finally:
            for task in attack:
                task.cancel()
            await asyncio.gather(*attack, return_exceptions=True)
            srv.kill()


async def test_a_download_that_drips_is_cut_at_its_deadline_and_nothing_is_kept(tmp_path):
    async with FakeWeb() as web:
        web.trickle("/drip", 0.5)
        srv = start(tmp_path, "--download-timeout", "3")
        try:
            c = await V2Client.open(srv.url)
            kp = keypair("dripped")
            agent_id, _ = await setup_session(c, kp)
            t = time.perf_counter()
            r = await c.call(kp, {"_": "DownloadAgentMemoryFile", "agentId": agent_id, "url": web.url("/drip")},
                             timeout=60)
            took = time.perf_counter() - t
            assert r["_"] == "Error" and r["status"] == 502 and "--download-timeout" in r["message"], r
            assert 3 <= took < 15
            listed = await c.call(kp, {"_": "ListAgentMemory", "agentId": agent_id})
            assert listed["entries"] == []
            await c.close()
        finally:
            srv.kill()


async def test_a_persons_tool_call_is_cut_at_the_tool_timeout(tmp_path):
    async with FakeWeb() as web:
        web.page("/links", LINKS)   # fetched at once; its conversion takes longer than the deadline
        srv = start(tmp_path, "--tool-timeout", "1")
        try:
            c = await V2Client.open(srv.url)
            kp = keypair("impatient")
            _, sid = await setup_session(c, kp)
            t = time.perf_counter()
            r = await c.call(kp, read_action(sid, web.url("/links")), timeout=120)
            took = time.perf_counter() - t
            assert r["_"] == "InvokeSessionToolResponse" and "1 s" in r.get("error", ""), r
            assert took < 6
            await c.close()
        finally:
            srv.kill()


@pytest.mark.slow
async def test_honest_get_session_p99_stays_under_50_ms_while_pages_are_converted(tmp_path):
    """make stress: the budget of issue 32 on a quiet machine (the figure goes in the note)."""
    async with FakeWeb() as web:
        web.page("/links", LINKS)
        web.hang("/hang")
        srv = start(tmp_path, "--tool-timeout", "60")
        attack: list[asyncio.Task] = []
        try:
            (ac, akp, asid), (hc, hkp, hsid) = await two_accounts(srv)
            honest = Honest(hc, hkp, hsid)
            quiet = await honest.quiet(200)
            for _ in range(12):
                attack.append(asyncio.create_task(ac.call(akp, read_action(asid, web.url("/links")), timeout=300)))
            await until(lambda: sum(p == "/links" for _, p in web.requests) >= 12, 60, what="the link pages fetched")
            for _ in range(48):
                attack.append(asyncio.create_task(ac.call(akp, read_action(asid, web.url("/hang")), timeout=300)))
            await until(lambda: sum(p == "/hang" for _, p in web.requests) >= 4, 60, what="the slow reads")
            honest.start()
            await asyncio.sleep(15)   # the measurement's length, not a wait for a condition
            loud = await honest.stop()
            p99 = percentile(loud, 0.99)
            print(f"\nhonest GetSession p99 {percentile(quiet, 0.99) * 1000:.1f} ms quiet, "
                  f"{p99 * 1000:.1f} ms during 12 conversions and 48 hanging reads ({len(loud)} samples)")
            assert p99 < 0.05
        finally:
            for task in attack:
                task.cancel()
            await asyncio.gather(*attack, return_exceptions=True)
            srv.kill()
