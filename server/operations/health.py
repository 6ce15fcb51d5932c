"""The health answer (`GET /api/health`, `/agents/api/health`): liveness, and what this server can
really do (CONTRACT section 8, "Health"). The Seed desktop offers tools from these flags and
assumes a missing one is on, so every flag is stated, from the settings and from what is built:
never a claim the server cannot keep.
"""
from __future__ import annotations

# Before the runtime has chosen its sandbox (server/sandbox/), nothing runs.
CODE_EXEC_REASON = "The code sandbox has not started yet"
CODE_EXEC_REASON_CODE = "runtime-error"


def health(app, version: str) -> dict:  # noqa: ANN001
    config = app.config
    value: dict = {"status": "ok", "ok": True, "uptime": round(app.uptime(), 3), "version": version,
                   "schemaVersion": app.db.schema_version, "storage": app.db.backend}
    if app.heads is not None:   # the key that signs session heads (docs/protocol.md, "Verifiable history")
        value["serverKey"] = app.heads.public_id
    if config.hm_server_url:
        # Documents and icons are read back from the HM server's gateway, as the reference
        # does when no separate IPFS server is configured.
        value["hmServerUrl"] = config.hm_server_url
        value["ipfsServerUrl"] = config.hm_server_url
    # Ours: whether the HM server answers (`reachable` null until it was asked), and what is
    # still waiting for it; `offline` when none is configured (--hm-server-url '').
    hm = getattr(getattr(app, "runtime", None), "hm", None)
    if hm is None:
        value["hmServer"] = {"offline": True}
    else:
        value["hmServer"] = {"reachable": hm.reachable,
                             **({"error": hm.unreachable_reason} if hm.unreachable_reason else {})}
        queue = getattr(app, "publications", None)
        if queue is not None:   # publications waiting for it, and refused ones kept (as of the queue's last look)
            value["hmServer"]["publications"] = dict(queue.counts)
    value["webTools"] = {"search": bool(getattr(config, "searxng_url", None)),
                         "readBrowser": bool(getattr(config, "crawler_url", None))}
    # Which searches an agent has: Seed's (`call search`, the HM server's search API), its own
    # memory's (`call search_memory`, always), the web's (`call web_search`, with SearXNG).
    value["searches"] = {"seed": bool(config.hm_server_url), "memory": True,
                         "web": bool(getattr(config, "searxng_url", None))}
    # "Sign in with ChatGPT" (StartProviderOAuth...) is offered only when the operator turned it on.
    value["subscriptionAuth"] = bool(getattr(config, "subscription_auth", False))
    value.update(code_exec(getattr(app.runtime, "sandbox", None)))
    return value


def code_exec(sandbox) -> dict:  # noqa: ANN001
    """`codeExec` true only when the sandbox passed its self-check at start, with the runtimes it
    offers (and, for `ts`, what it really runs: `codeExecRuntimeNotes`); else why not. The same
    keys either way."""
    availability = getattr(sandbox, "availability", None)
    if availability is None or not availability.available:
        return {"codeExec": False, "codeExecBackend": getattr(sandbox, "name", ""), "codeExecRuntimeNotes": {},
                "codeExecReason": availability.reason if availability is not None else CODE_EXEC_REASON,
                "codeExecReasonCode": availability.code if availability is not None else CODE_EXEC_REASON_CODE,
                "codeExecRuntimes": []}
    # (Every field is stated either way, as CONTRACT section 8 asks: the reason empty here.)
    return {"codeExec": True, "codeExecReason": "", "codeExecReasonCode": "",
            "codeExecRuntimes": list(availability.runtimes), "codeExecBackend": availability.backend,
            "codeExecRuntimeNotes": dict(availability.notes)}
