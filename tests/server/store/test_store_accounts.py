"""Accounts and signers, accepted signatures, idempotency records."""
from __future__ import annotations

import apsw
import pytest

from seed_agents.server.store import accounts, idempotency, signatures

ACCOUNT = "z6MkAccount"


def test_signers(conn):
    assert not accounts.is_signer(conn, ACCOUNT, "z6MkDelegate")
    accounts.add_signer(conn, ACCOUNT, "z6MkDelegate", "AGENT", "bafy-cid", b"\x01blob", 10)
    accounts.add_signer(conn, ACCOUNT, "z6MkDelegate", "WRITER", b"\x01\x71cid", b"\x02blob", 20)  # upsert
    assert accounts.is_signer(conn, ACCOUNT, "z6MkDelegate")
    assert not accounts.is_signer(conn, "z6MkOther", "z6MkDelegate")
    assert conn.execute("SELECT role, capability, created_at FROM account_signers").fetchall() == [
        ("WRITER", b"\x02blob", 10)]
    accounts.ensure_account(conn, ACCOUNT, 99)  # idempotent: keeps the first created_at
    assert conn.execute("SELECT created_at FROM accounts").fetchall() == [(10,)]


def test_claim_signature_once_until_expired(conn):
    sig = bytes(range(64))
    assert signatures.claim_signature(conn, sig, expires_at=100, now=50)
    assert not signatures.claim_signature(conn, sig, expires_at=130, now=80)
    assert not signatures.claim_signature(conn, sig, expires_at=150, now=100)  # live at its expiry ms
    assert signatures.claim_signature(conn, sig, expires_at=200, now=101)     # expired: taken over
    assert signatures.unexpired_signatures(conn, 150) == [(sig, 200)]


def test_prune_signatures(conn):
    for i in range(10):
        signatures.claim_signature(conn, bytes([i]) * 64, expires_at=100 + i, now=0)
    assert signatures.prune_signatures(conn, 105) == 5
    assert [e for _, e in signatures.unexpired_signatures(conn, 0)] == [105, 106, 107, 108, 109]


def test_claimed_sets_reload_each_signature_until_its_own_expiry_then_go(conn):
    first = [(bytes([1]) * 64, 100), (bytes([2]) * 64, 130)]
    signatures.claim_signatures(conn, first, now=0)
    signatures.claim_signatures(conn, [(bytes([3]) * 64, 120)], now=0)
    signatures.claim_signatures(conn, [], now=0)   # nothing to keep: no row
    signatures.claim_signature(conn, bytes([4]) * 64, expires_at=110, now=0)   # the per-signature table
    assert conn.execute("SELECT count(*) FROM accepted_signature_sets").fetchone()[0] == 2
    assert sorted(signatures.unexpired_signatures(conn, 0)) == sorted(first + [(bytes([3]) * 64, 120),
                                                                             (bytes([4]) * 64, 110)])
    # Each signature keeps its own expiry; a set goes once the last of its has expired.
    assert sorted(signatures.unexpired_signatures(conn, 115)) == [(bytes([2]) * 64, 130), (bytes([3]) * 64, 120)]
    assert signatures.prune_signatures(conn, 125) == 2   # the row of 4, the set of 3
    assert signatures.unexpired_signatures(conn, 125) == [(bytes([2]) * 64, 130)]
    with pytest.raises(ValueError, match="not 64 bytes"):
        signatures.claim_signatures(conn, [(b"short", 200)], now=0)


def test_idempotency_record(conn):
    assert idempotency.idem_get(conn, ACCOUNT, "CreateAgent", "c1") is None
    idempotency.idem_put(conn, ACCOUNT, "CreateAgent", "c1", b"fp", b"resp", 5)
    assert idempotency.idem_get(conn, ACCOUNT, "CreateAgent", "c1") == (b"fp", b"resp")
    assert idempotency.idem_get(conn, ACCOUNT, "CreateSession", "c1") is None
    assert idempotency.idem_get(conn, "z6MkOther", "CreateAgent", "c1") is None
    with pytest.raises(apsw.ConstraintError):
        idempotency.idem_put(conn, ACCOUNT, "CreateAgent", "c1", b"fp2", b"resp2", 6)
