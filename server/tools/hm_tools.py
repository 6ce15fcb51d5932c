"""Seed hypermedia for the agent: `read hm://…` (and `navigate` to one), and `write hm://…`
(publish a document), through the server's HM client (server/hm_client.py, on the runtime's
guarded HTTP client, so the HM server is reached under the network policy).

An agent publishes only with the signing identities its definition names (`signingKey`,
`signingKeys`; `options.signer` picks one of those by name, else the first): the seed is opened
from the store for that one write and never leaves this module. What comes back from the HM server
is untrusted text for the model, nothing more.
"""
from __future__ import annotations

from protocol.actions_identities import signing_keys_of
from server.hm_client import HmError, HmNotFound
from server.store import identities as identities_q
from server.tools.context import ToolContext, ToolFailure, ToolResult

_WRITE_OPTIONS = {"name", "signer", "action"}
_ACTIONS = ("create", "update")


def _client(ctx: ToolContext):  # noqa: ANN202
    if ctx.hm is None:
        raise ToolFailure("hm:// needs a Seed hypermedia server, and this server has none (--hm-server-url)")
    return ctx.hm


async def read(ctx: ToolContext, address: str) -> ToolResult:
    hm = _client(ctx)
    try:
        markdown = await hm.read_document(address)
    except ValueError as exc:
        raise ToolFailure(f"not an hm:// address this server can read: {exc}") from None
    except HmNotFound as exc:
        raise ToolFailure(str(exc)) from None
    except HmError as exc:
        raise ToolFailure(str(exc)) from None
    return ToolResult({"summary": f"Read {address}.", "url": address, "markdown": markdown})


async def write(ctx: ToolContext, address: str, params: dict) -> ToolResult:
    hm = _client(ctx)
    options = params.get("options") if isinstance(params.get("options"), dict) else {}
    unknown = set(options) - _WRITE_OPTIONS
    if unknown:
        raise ToolFailure(f"unrecognized option(s) for an hm:// write (refused, not ignored): "
                          f"{', '.join(sorted(unknown))}; this server takes {', '.join(sorted(_WRITE_OPTIONS))}")
    action = options.get("action", "create")
    if action not in _ACTIONS:
        raise ToolFailure(f"hm:// writes here take action {' or '.join(_ACTIONS)}; {action!r} is not available "
                          "on this server yet")
    content = params.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ToolFailure("an hm:// write needs the document's markdown in `content`")
    names = signing_keys_of(ctx.agent.get("definition") or {})
    if not names:
        raise ToolFailure("you have no signing identity to publish with (your definition names none: signingKey)")
    signer = options.get("signer", names[0])
    if signer not in names:
        raise ToolFailure(f"you can publish only as {', '.join(names)} (the identities your definition names)")
    markdown = content
    if isinstance(options.get("name"), str) and options["name"].strip() and not content.lstrip().startswith("---"):
        name = options["name"].strip().replace("\n", " ")
        markdown = f"---\nname: {_yaml_text(name)}\n---\n{content}"
    if params.get("dryRun") is True:
        return ToolResult({"summary": f"Dry run: {address} would be published as {signer}; nothing was published.",
                           "url": address, "signer": signer, "markdown": markdown})
    seed = ctx.db.read(identities_q.open_seed, ctx.box, ctx.account, signer)
    if seed is None:
        raise ToolFailure(f"the signing identity {signer!r} is gone (deleted from the account)")
    target = None if address.rstrip("/").count("/") <= 2 else address
    try:
        version = await hm.publish_document(seed, markdown, target, ctx.now_ms())
    except ValueError as exc:
        raise ToolFailure(str(exc)) from None
    except HmError as exc:
        raise ToolFailure(str(exc)) from None
    return ToolResult({"summary": f"Published {address} as {signer}.", "url": address, "version": version,
                       "signer": signer})


def _yaml_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
