"""Subscribe: the access check and the response value. The stream itself (replay, then live)
belongs to the connection, since only it knows how to frame and pace events."""
from __future__ import annotations

from protocol.errors import ProtocolError, quote
from server.handlers.access import own_agent, own_run, own_session

_CHECKS = {"agents": own_agent, "sessions": own_session, "runs": own_run}


def check_access(app, account_id: str, action) -> None:
    """404 unless the account may read what the key names (the key's form was checked by
    protocol.actions: `action.kind` is one of account, agents, sessions, runs)."""
    if action.kind == "account":
        if action.target != account_id:
            raise ProtocolError(404, f"{quote(action.key)} not found; subscribe to account/{account_id}")
        return
    app.db.read(_CHECKS[action.kind], account_id, action.target)


async def subscribe(app, env, action) -> dict:
    check_access(app, env.account_id, action)
    return {"_": "SubscribeResponse", "key": action.key, "accountId": env.account_id}
