"""The front page (`GET /`): what a person who opens the server's address in a browser, or a
script that asks for JSON, should learn: what this is, its version and health, how to connect
the Seed desktop to it, and where the docs are. Pure: the caller passes what it knows."""
from __future__ import annotations

import html
import re

HEALTH_PATH = "/api/health"   # (framing_http.HEALTH_PATHS; not imported: it imports this module)
WS_PATH = "/agents/ws"

_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,255}$")   # a Host header fit to be shown back


def page_value(host: str, about: dict) -> dict:
    """The page as a JSON value. `host`: the request's Host header (the address the client
    used, so the desktop URL shown is one that reaches this server); `about`: version,
    schemaVersion, uptime (seconds) and, when known, commit."""
    address = host if _HOST.match(host or "") else "127.0.0.1:3050"
    value = {
        "name": "Seed Agents server",
        "version": about.get("version"),
        "schemaVersion": about.get("schemaVersion"),
        "health": {"status": "ok", "uptime": about.get("uptime"), "url": HEALTH_PATH},
        "desktop": {"url": f"http://{address}",
                    "howTo": f"paste http://{address} into the Seed desktop's agent server setting"},
        "websocket": f"ws://{address}{WS_PATH}",
        "cli": f"seed-agents chat --url http://{address}",
        "docs": "README.md and docs/ (protocol.md, operations.md) in the server's source; "
                "`seed-agents --help` for the command line",
    }
    if about.get("commit"):
        value["commit"] = about["commit"]
    return value


def _with_code(text: str) -> str:
    """`text` escaped, its `backtick spans` as <code> (the JSON value keeps the plain text)."""
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:   # an unpaired backtick: shown as it is
        return html.escape(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def page_html(value: dict) -> str:
    e = html.escape
    desktop = value["desktop"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{e(value["name"])}</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 2em auto">
<h1>{e(value["name"])}</h1>
<p>Version {e(str(value["version"]))} (schema version {e(str(value["schemaVersion"]))}) &middot;
health: <a href="{e(value["health"]["url"])}">{e(value["health"]["status"])}</a>
(up {e(str(value["health"]["uptime"]))} s)</p>
<h2>Connect the Seed desktop</h2>
<p>Paste <code>{e(desktop["url"])}</code> into the desktop's agent server setting.</p>
<h2>From a terminal</h2>
<p><code>{e(value["cli"])}</code> (WebSocket: <code>{e(value["websocket"])}</code>)</p>
<h2>Docs</h2>
<p>{_with_code(value["docs"])}</p>
</body></html>
"""
