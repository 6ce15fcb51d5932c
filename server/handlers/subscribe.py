"""Subscribe: the access check and the response value. The stream itself (replay, then live)
belongs to the connection, since only it knows how to frame and pace events."""
from __future__ import annotations

from protocol.errors import ProtocolError, quote
from server.handlers.access import own_agent, own_run, own_session

_CHECKS = {"agents": own_agent, "sessions": own_session, "runs": own_run}


def check_access(app, account_id: str, key: str) -> tuple[str, str]:
    kind, _, ident = key.partition("/")
    if kind == "account":
        if ident != account_id:
            raise ProtocolError(404, f"{quote(key)} not found; subscribe to account/{account_id}")
        return kind, ident
    check = _CHECKS.get(kind)
    if check is None or not ident:
        raise ProtocolError(400, f"key {quote(key)} must be account/<id>, agents/<id>, sessions/<id> or runs/<id>")
    app.db.read(check, account_id, ident)
    return kind, ident


async def subscribe(app, env, action) -> dict:
    check_access(app, env.account_id, action.key)
    return {"_": "SubscribeResponse", "key": action.key, "accountId": env.account_id}
