"""`sessions export SESSION --car FILE` and `verify FILE`: a session's verifiable history
written as a CAR file, and checked offline with no server (docs/protocol.md, "Verifiable history")."""
from __future__ import annotations

import datetime
import json

from ..errors import HistoryError
from ..history import verify_file
from .common import CliError, open_client
from .resolve import session_id


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def proof_lines(proof) -> list[str]:  # noqa: ANN001
    signed = f"{proof.user_events} user message{'' if proof.user_events == 1 else 's'}, each signed by its account"
    if proof.accounts:
        signed += f" ({', '.join(proof.accounts)})"
    lines = [f"session {proof.session_id}: {proof.events} event{'' if proof.events == 1 else 's'}, "
             f"unbroken from 1 to {proof.events}",
             signed]
    if proof.unsigned_user_events:
        lines.append(f"{proof.unsigned_user_events} user message(s) from before envelopes were kept: "
                     "in the chain, but not provably signed")
    lines.append(f"head {proof.head} signed by server key {proof.server_key} at {_when(proof.head_ts)}")
    return lines


def proof_json(proof) -> dict:  # noqa: ANN001
    return {"sessionId": proof.session_id, "events": proof.events, "userEvents": proof.user_events,
            "unsignedUserEvents": proof.unsigned_user_events, "accounts": list(proof.accounts),
            "serverKey": proof.server_key, "head": proof.head, "headTs": proof.head_ts}


async def export(args) -> int:
    async with open_client(args) as client:
        session = await session_id(client, args.session)
        try:
            proof = await client.export_session(session, args.car)
        except HistoryError as exc:
            raise CliError(f"cannot export session {session}: {exc.message}") from None
    print(f"wrote {args.car}")
    for line in proof_lines(proof):
        print(line)
    return 0


def verify(args) -> int:
    try:
        proof = verify_file(args.file, args.server_key)
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}", code=2) from None
    except HistoryError as exc:
        where = f" (event {exc.seq})" if exc.seq is not None else ""
        raise CliError(f"{args.file} does not verify{where}: {exc.message}") from None
    if args.json:
        print(json.dumps(proof_json(proof)))
    else:
        for line in proof_lines(proof):
            print(line)
    return 0


def register(sub, common) -> None:  # noqa: ANN001
    p = sub.add_parser("verify", help="check a session export offline",
                       description="Check a session export (`seed-agents sessions export`) with no "
                                   "server: every event unbroken from 1 to N, each user message "
                                   "signed by its account, the head signed by the server key.")
    p.add_argument("file", metavar="FILE", help="the .car file")
    p.add_argument("--server-key", default=None, metavar="KEY",
                   help="the server key (z6Mk..., from the server's health answer) the head must "
                        "be signed by; without it, the key the export names is reported")
    p.add_argument("--json", action="store_true", help="print what it proves as JSON")
    p.set_defaults(run=verify)
