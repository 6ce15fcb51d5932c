"""A replay claim the dispatcher hands to the action's handler, to be made in its own statements.

With several servers on one database, a signature's row in `accepted_signatures` is the claim
that counts (docs/protocol.md, "Replay with several servers"), made before anything is answered.
Made on its own it is one more round trip and, for a write, one more transaction and fsync
(server/verification/dispatch.py). A route marked `claims` (server/routes.py) takes it with
its own statements instead: CreateSession and MessageSession as the first statement of their
write job (so it is durable with the session or the message, in the same commit), GetSession as the first statement of its read's
round trip (`aread_each(..., claim=)`). The claim is still made before the action's effect and
before any answer: if the handler's statements did not make it (they failed, or took another
path), the dispatcher makes it after the handler, before it answers (`HandedClaim.ensure`).

The handler gets the claim with `handed()` (None when there is none to take: one server, whose
guard keeps claims in memory, or a route that is not marked), sends `statement()` first, calls
`refuse_unless(rows)` with what it returned (no row: another server holds the signature, 409,
raised before the action's effect, inside its transaction), and `made()` once that transaction
committed. A write job may run on the writer's thread: nothing here touches the loop's state
(the dispatcher forgets a refused signature in its guard, on the loop).
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from .errors import Refused

# One signature's claim: a live row is kept (no row back: refused), an expired one taken over.
CLAIM_ROW = ("INSERT INTO accepted_signatures (sig, expires_at) VALUES (?1, ?2)"
             " ON CONFLICT (sig) DO UPDATE SET expires_at = excluded.expires_at"
             " WHERE accepted_signatures.expires_at < ?3 RETURNING sig")

REPLAYED = ("replayed envelope: this signature was already accepted (by another server); sign the "
            "action again (new ts) and use idempotency ids for retries")


@dataclass(slots=True)
class HandedClaim:
    sig: bytes
    expires_at: int
    now: int
    # The claim made on its own (the dispatcher's path): raises the 409 when refused.
    make: Callable[[], Awaitable[None]]
    done: bool = field(default=False)      # made (held), or refused
    refused: bool = field(default=False)   # another server holds it: the dispatcher forgets it

    def statement(self) -> tuple[str, tuple[Any, ...]]:
        return CLAIM_ROW, (self.sig, self.expires_at, self.now)

    def refuse_unless(self, rows: list) -> None:
        """409 when the claim statement returned no row (a live claim exists elsewhere)."""
        if not rows:
            self.done = self.refused = True
            raise Refused(409, REPLAYED)

    def made(self) -> None:
        """The claim statement returned its row in a transaction that committed."""
        self.done = True

    async def ensure(self) -> None:
        """Made on its own, unless the handler's statements made it already."""
        if not self.done:
            self.done = True
            try:
                await self.make()
            except Exception:
                self.refused = True   # (409: another server's; or not made at all)
                raise


_HANDED: contextvars.ContextVar[HandedClaim | None] = contextvars.ContextVar("handed_claim", default=None)


def hand(claim: HandedClaim | None) -> contextvars.Token:
    """The dispatcher: `claim` is the current action's (in its task's context)."""
    return _HANDED.set(claim)


def take_back(token: contextvars.Token) -> None:
    _HANDED.reset(token)


def handed() -> HandedClaim | None:
    """The current action's claim, when it is the handler's to make and not made yet."""
    claim = _HANDED.get()
    return None if claim is None or claim.done else claim
