"""One access line per action, for operators: transport, action, account, status, milliseconds.

Called once per action from the end of `seed_agents.server.verification.dispatch.execute`. The line carries the action's
name and never its fields, so no secret, key or message text can reach it. INFO level: a server
run with `--log-level WARNING` (the benchmarks) pays one level check per action.
"""
from __future__ import annotations

import logging

log = logging.getLogger("seed_agents.access")


def short_account(account_id: str | None) -> str:
    """`z6MkjN1R…FzmqSD`: enough to tell accounts apart in a log, short enough to read."""
    if not account_id:
        return "-"
    return account_id if len(account_id) <= 16 else f"{account_id[:8]}…{account_id[-6:]}"


def record(conn, name: str, outcome, status: int, seconds: float) -> None:
    if not log.isEnabledFor(logging.INFO):
        return
    transport = conn.transport   # "http", "v1" or "v2"
    env = outcome.envelope
    account = short_account(env.account_id if env is not None else getattr(conn, "account_id", None))
    ms = round(seconds * 1000, 1)
    log.info("%s %s %s %s %.1f ms", transport, name, account, status, ms,
             extra={"transport": transport, "action": name, "account": account, "status": status,
                    "ms": ms})
