"""Webhook triggers: `POST /agents/hooks/<triggerId>` on the server's one port.

The trigger's secret is made at creation (`new_secret`), stored as its sha256 for checking and
sealed with the secrets key for editors (GetAgentTrigger), bound to the trigger's id. A delivery
carries it as `Authorization: Bearer <secret>` (or `X-Seed-Webhook-Secret`); the check hashes
what was presented and compares digests in constant time, against a stand-in digest when the
trigger does not exist, so an unknown, disabled or wrong-secret hook costs the same and gets the
same 404: trigger ids cannot be probed.

A body over `--webhook-max-body` is refused (413) before it is read; each client address has a
token bucket (`--webhook-rate-limit`, 429 past it). `Idempotency-Key` makes the firing's key
`webhook:<key>`: the same key with the same body answers the first firing again, with another body
409. A delivery without one gets a fresh key. The answer is 202 with the firing's id.

Its `Endpoint` (`endpoint`) is registered into the HTTP route table at start (server/main.py,
server/http_routes.py): the transport reads a POST's body within the cap and hands over the
complete request (`answer`); it knows nothing of triggers.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets as pysecrets
import time
from typing import Any, Protocol
from collections import OrderedDict

from seed_agents.protocol.api.fields import MAX_ID
from ..http_routes import Endpoint, HttpRequest
from ..ratelimit import Clock, TokenBucket
from ..store import triggers as triggers_q
from .event import Event
from .port import TriggerContext

HOOK_PREFIX = "/agents/hooks/"
SECRET_PREFIX = "whsec_"
MAX_KEY = 200                  # characters of an Idempotency-Key
MAX_ADDRESSES = 10_000         # client addresses with a bucket (least recently seen dropped)
MAX_JSON_DEPTH = 32            # nesting of a JSON body kept as data (deeper: kept as text)
_STAND_IN = hashlib.sha256(b"no such webhook").digest()

log = logging.getLogger("seed_agents.triggers")


def hook_path(trigger_id: str) -> str:
    return HOOK_PREFIX + trigger_id


def new_secret() -> str:
    return SECRET_PREFIX + pysecrets.token_urlsafe(32)


def secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def _aad(trigger_id: str) -> bytes:
    return f"webhook\x00{trigger_id}".encode()


def store_secret(conn, box, trigger_id: str, account_id: str, secret: str, now: int) -> None:
    triggers_q.set_credentials(conn, trigger_id, account_id, secret_hash(secret),
                               box.seal(secret.encode(), _aad(trigger_id)), now)


def open_secret(box, trigger_id: str, sealed: bytes) -> str:
    return box.open(sealed, _aad(trigger_id)).decode()


def secret_matches(presented: str | None, stored_hash: bytes | None) -> bool:
    """Constant time in what is compared: the digest of what was presented against the stored
    digest (or a stand-in when there is none, so a missing trigger costs the same)."""
    digest = secret_hash(presented or "")
    same = hmac.compare_digest(digest, stored_hash if stored_hash is not None else _STAND_IN)
    return bool(same & (stored_hash is not None) & (presented is not None))   # (no short circuit)


# -- HTTP ----------------------------------------------------------------------------------------
def endpoint(triggers: Hooks) -> Endpoint:
    """Webhooks in the HTTP route table: every path under HOOK_PREFIX (route kind `hook` for a
    POST, `hook_method` for anything else), bodies up to `--webhook-max-body`, and their own
    rate limit per address (`Deliveries`), so they are not counted as probes. Registered by
    server/main.py once the triggers are built, before the port serves."""
    async def answer_request(req: HttpRequest) -> bytes:
        return await answer(triggers, req.framing, req.route.path, req.method, req.headers, req.body, req.address,
                            req.keep_alive)
    return Endpoint(HOOK_PREFIX, "hook", answer_request, body_cap=triggers.ctx.config.webhook_max_body, what="webhook",
                    limited_alone=True)


class Deliveries:
    """The per-address buckets (one per server)."""

    def __init__(self, rate: float, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self.buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def allow(self, address: str) -> bool:
        bucket = self.buckets.pop(address, None) or TokenBucket(self.rate, max(1, int(self.rate * 4)), self.clock)
        self.buckets[address] = bucket
        if len(self.buckets) > MAX_ADDRESSES:
            self.buckets.popitem(last=False)
        return bucket.take()


class Hooks(Protocol):
    """What a webhook call reaches (server/triggers/service.Triggers): the port's parts, the
    per-address buckets, and a firing admitted now."""

    @property
    def ctx(self) -> TriggerContext: ...
    @property
    def deliveries(self) -> Deliveries: ...
    async def fire(self, trigger: dict, event: Event) -> Any: ...


def _headers(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers:
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _presented(h: dict[str, str]) -> str | None:
    auth = h.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return h.get("x-seed-webhook-secret")


def refusal_reason(trigger: dict | None, presented: str | None) -> str:
    """Why a delivery was refused, for the server's log (never the secret itself)."""
    if trigger is None:
        return "no enabled webhook trigger has this id"
    if presented is None:
        return ("no secret was presented (send it as `Authorization: Bearer <secret>` or "
                "`X-Seed-Webhook-Secret: <secret>`; a secret in the URL is not read)")
    return "the secret presented is not this trigger's"


def _body_value(content_type: str, body: bytes) -> object:
    """JSON when the content type says so and it is plain data (no NaN, nested at most
    MAX_JSON_DEPTH deep: the firing keeps it as DAG-CBOR), else the body as text."""
    if content_type.split(";", 1)[0].strip().lower().endswith("json"):
        value = plain_json(body)
        if value is not None:
            return value
    return body.decode("utf-8", "replace")


def plain_json(data: bytes | str, limit: int = MAX_JSON_DEPTH) -> object | None:
    """`data` parsed as JSON, or None when it is not, holds NaN or Infinity, or nests deeper
    than `limit` (untrusted input: it must store as DAG-CBOR and decode back)."""
    def refuse(constant: str) -> object:
        raise ValueError(constant)

    try:
        value = json.loads(data, parse_constant=refuse)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if depth_within(value, limit) else None


def depth_within(value: object, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


async def answer(triggers: Hooks, framing, path: str, method: str, headers, body: bytes, address: str,
                 keep_alive: bool) -> bytes:
    """The whole answer to one webhook request (its body already read, within the cap)."""
    if method != "POST":
        return framing.json(405, {"status": "error", "message": f"{method} is not allowed on webhooks (allowed: POST)"},
                            keep_alive=keep_alive, extra=b"Allow: POST\r\n")
    if not triggers.deliveries.allow(address):
        return framing.json(429, {"status": "error", "message": "too many webhook calls from this address; "
                                  "slow down"}, keep_alive=keep_alive, extra=b"Retry-After: 1\r\n")
    trigger_id = path[len(HOOK_PREFIX):]
    h = _headers(headers)
    found = None
    if 0 < len(trigger_id) <= MAX_ID and "/" not in trigger_id:
        found = await triggers.ctx.db.aread(triggers_q.hook_target, trigger_id)
    trigger, stored = found if found is not None else (None, None)
    if not secret_matches(_presented(h), stored) or trigger is None:
        # The caller gets the same 404 whatever the cause; the owner reads why in the log.
        log.info("webhook call to %s from %s refused (404): %s", path, address,
                 refusal_reason(trigger, _presented(h)))
        return framing.not_found(path, keep_alive=keep_alive)
    key = h.get("idempotency-key")
    if key is not None and (not key.strip() or len(key) > MAX_KEY or not key.isprintable()):
        return framing.json(400, {"status": "error", "message": f"Idempotency-Key must be 1 to {MAX_KEY} "
                                  "printable characters"}, keep_alive=keep_alive)
    key = key.strip() if key is not None else "auto-" + pysecrets.token_hex(16)
    digest = hashlib.sha256(body).digest()
    content_type = h.get("content-type", "")
    activity = {"type": "webhook", "idempotencyKey": key, "contentType": content_type,
                "bytes": len(body), "body": _body_value(content_type, body)}
    outcome = await triggers.fire(trigger, Event(f"webhook:{key}", f"webhook call ({len(body)} bytes)",
                                                 activity, body_digest=digest))
    if outcome is None:   # deleted or disabled in between
        return framing.not_found(path, keep_alive=keep_alive)
    firing = outcome.firing
    if not outcome.new and firing.get("_digest") != digest:
        return framing.json(409, {"status": "error", "message": "this Idempotency-Key was already used with "
                                  "a different body"}, keep_alive=keep_alive)
    if outcome.new:
        triggers.ctx.broadcaster.notify_account(trigger["account"], "trigger-updated", agent_id=trigger["agentId"])
    value = {"status": "accepted", "firingId": firing["id"], "firingStatus": firing["status"]}
    if "sessionId" in firing:
        value["sessionId"] = firing["sessionId"]
    return framing.json(202, value, keep_alive=keep_alive)
