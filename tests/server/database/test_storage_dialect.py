"""The SQLite-to-PostgreSQL rewrite of the store's SQL (server/database/postgres/dialect.py): pure strings,
then a few rewritten statements run on a real PostgreSQL (the whole store's SQL runs there in
tests/server/database/test_storage_conformance.py and the PostgreSQL pass of the end-to-end tests)."""
from __future__ import annotations

import pytest

from seed_agents.server.database.postgres.dialect import to_postgres

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)


def text(sql: str) -> str:
    return to_postgres(sql).text


# -- placeholders ----------------------------------------------------------------------------
def test_plain_placeholders_become_numbered_in_order():
    stmt = to_postgres("SELECT a FROM t WHERE b = ? AND c = ? LIMIT ?")
    assert stmt.text == "SELECT a FROM t WHERE b = $1 AND c = $2 LIMIT $3"
    assert stmt.count == 3
    assert stmt.params(("x", 2, 3)) == ("x", 2, 3)


def test_numbered_placeholders_are_one_parameter_wherever_they_appear():
    stmt = to_postgres("UPDATE t SET a = max(a, ?1), b = coalesce(?2, b) WHERE id = ?3 AND ?2 IS NOT NULL")
    assert stmt.text == "UPDATE t SET a = GREATEST(a, $1), b = coalesce($2, b) WHERE id = $3 AND $2 IS NOT NULL"
    assert stmt.count == 3
    assert stmt.params((10, "v", "id-1")) == (10, "v", "id-1")
    # Out of order, and two digits; parameters past the highest number are not sent.
    many = to_postgres("SELECT ?12, ?1, ?10, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?11")
    assert many.text.startswith("SELECT $12, $1, $10, $2") and many.count == 12
    assert many.params(list(range(100, 113))) == tuple(range(100, 112))


def test_mixing_plain_and_numbered_placeholders_is_refused():
    with pytest.raises(ValueError, match="mixes"):
        to_postgres("SELECT ?1, ?")


def test_a_numbered_placeholder_skipped_is_refused():
    # PostgreSQL could not type a parameter the statement never uses.
    with pytest.raises(ValueError, match="skip"):
        to_postgres("SELECT ?1, ?3")


# -- quoting and percent signs ---------------------------------------------------------------
def test_a_percent_sign_is_left_alone():
    # Parameters are bound by the server ($N), so nothing reads `%` as a placeholder.
    assert text("SELECT seq % 2 FROM t WHERE a = ?") == "SELECT seq % 2 FROM t WHERE a = $1"
    assert text("SELECT '50%' WHERE b LIKE 'a%'") == "SELECT '50%' WHERE b LIKE 'a%'"


def test_quoted_text_is_copied_untouched():
    for sql in ("SELECT 'a ? b', 'max(1, 2)', 'rowid', 'x INDEXED BY y', 'AND +z'",
                "SELECT 'it''s ?', \"max\", \"rowid\", 'tail ''?'''",
                "SELECT '', '''' , '?'"):
        assert text(sql) == sql
    stmt = to_postgres("SELECT 'who?' || ? || 'what''s ?1'")
    assert stmt.text == "SELECT 'who?' || $1 || 'what''s ?1'" and stmt.count == 1


# -- two-argument max/min versus the aggregates ----------------------------------------------
def test_two_argument_max_min_become_greatest_least_and_aggregates_stay():
    assert text("SELECT max(a, b), MIN(c, d, e)") == "SELECT GREATEST(a, b), LEAST(c, d, e)"
    assert text("SELECT max(seq), min(created_at) FROM t") == "SELECT max(seq), min(created_at) FROM t"
    assert text("SELECT max (a, b), Max(\n a,\n b)") == "SELECT GREATEST (a, b), GREATEST(\n a,\n b)"
    # A comma inside an inner call or inside quotes is not the outer call's.
    assert text("SELECT max(coalesce(a, 0)), max(coalesce(a, 0), ?)") == \
        "SELECT max(coalesce(a, 0)), GREATEST(coalesce(a, 0), $1)"
    assert text("SELECT min(',', x), max(')') FROM t") == "SELECT LEAST(',', x), max(')') FROM t"
    # Words that merely contain the names are left alone.
    assert text("SELECT max_seq, minimum(a, b), t.maxed FROM t") == "SELECT max_seq, minimum(a, b), t.maxed FROM t"


def test_nested_calls_are_rewritten_at_every_level():
    assert text("SELECT max(min(a, b), max(c), min(d, max(e, f)))") == \
        "SELECT GREATEST(LEAST(a, b), max(c), LEAST(d, GREATEST(e, f)))"
    assert text("SELECT count(max(x)) , max(count(*), 1)") == "SELECT count(max(x)) , GREATEST(count(*), 1)"


# -- SQLite-only spellings -------------------------------------------------------------------
def test_rowid_becomes_the_queue_position():
    assert text("SELECT id, rowid FROM runs ORDER BY created_at, runs.rowid DESC") == \
        "SELECT id, pos FROM runs ORDER BY created_at, runs.pos DESC"
    assert text("SELECT ROWID, rowid_x, my_rowid FROM runs") == "SELECT pos, rowid_x, my_rowid FROM runs"


def test_indexed_by_hints_are_dropped():
    assert text("SELECT a FROM c INDEXED BY c_by_account JOIN agents a ON a.id = c.agent_id") == \
        "SELECT a FROM c JOIN agents a ON a.id = c.agent_id"
    assert text("SELECT a FROM c indexed  by\n idx WHERE x = ?") == "SELECT a FROM c WHERE x = $1"
    assert text("SELECT indexed FROM t") == "SELECT indexed FROM t"   # a column of that name


def test_a_unary_plus_hint_is_dropped_and_additions_stay():
    assert text("SELECT 1 FROM s WHERE agent_id = ? AND +account_id = ?") == \
        "SELECT 1 FROM s WHERE agent_id = $1 AND account_id = $2"
    assert text("WHERE (+a = 1) OR +b = 2 AND x = +_c") == "WHERE (a = 1) OR b = 2 AND x = _c"
    for sql in ("SET last_seq = last_seq + 1", "SELECT a +b, 2 +c, ? +d, 'x' +e, (f) +g, a+b"):
        assert text(sql) == sql.replace("?", "$1")


def test_the_rewrite_is_cached_per_statement():
    sql = "SELECT max(a, ?) FROM t"
    assert to_postgres(sql) is to_postgres(sql)


# -- the rewritten statements on a real PostgreSQL -------------------------------------------
def test_rewritten_statements_run_on_postgresql(postgres_url):
    import psycopg

    from seed_agents.server.database.postgres.database import PgConn

    raw = psycopg.connect(postgres_url, autocommit=True, cursor_factory=psycopg.RawCursor, prepare_threshold=1)
    try:
        conn = PgConn(raw)
        conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, n BIGINT, pos BIGINT GENERATED ALWAYS AS IDENTITY)")
        conn.executemany("INSERT INTO t (id, n) VALUES (?, ?)", [("a", 5), ("b", 7), ("c", None)])
        assert conn.changes() == 3
        # No parameters and a literal % (left alone: the server binds the parameters).
        assert conn.execute("SELECT '50%', 7 % 4").fetchone() == ("50%", 3)
        assert conn.execute("SELECT '50%', ?", ("?",)).fetchone() == ("50%", "?")
        rows = conn.execute(
            "SELECT id, max(coalesce(n, 0), ?1), min(coalesce(n, 0), ?1) FROM t INDEXED BY t_pkey"
            " WHERE +id >= ?2 ORDER BY rowid", (6, "b")).fetchall()
        assert rows == [("b", 7, 6), ("c", 6, 0)]
        assert conn.execute("SELECT max(n), min(n) FROM t").fetchone() == (7, 5)
        conn.execute("UPDATE t SET n = max(n, ?) WHERE id = 'a' OR id = 'it''s'", (9,))
        assert conn.changes() == 1
        assert conn.execute("SELECT n FROM t WHERE id = ?", ("a",)).fetchone() == (9,)
        assert conn.execute("SELECT 1 WHERE false").fetchone() is None
        assert conn.execute("DELETE FROM t WHERE id = ?", ("zz",)).fetchall() == []
        # A statement run many times in one round trip and after: unnamed at first, then named
        # and prepared once (its Parse sent with the run that names it).
        conn.executemany("INSERT INTO t (id, n) VALUES (?, ?)", [(f"m{i}", i) for i in range(6)])
        assert conn.changes() == 6
        for i in range(4):
            assert conn.execute("SELECT n FROM t WHERE id = ?", (f"m{i}",)).fetchone() == (i,)
        # A statement that fails at its second run (the one that prepares it) runs again after.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO t (id, n) VALUES (?, ?)", ("m0", 1))
        conn.execute("INSERT INTO t (id, n) VALUES (?, ?)", ("m9", 9))
        assert conn.execute("SELECT n FROM t WHERE id = ?", ("m9",)).fetchone() == (9,)
        # Reads that do not depend on each other, in one round trip.
        assert conn.fetch_each([("SELECT n FROM t WHERE id = ?", ("m1",)), ("SELECT 1 WHERE false", ()),
                                ("SELECT count(*) FROM t", ())]) == [[(1,)], [], [(10,)]]
    finally:
        raw.close()


def test_sqlites_no_limit_before_an_offset_is_dropped():
    stmt = to_postgres("SELECT id FROM t WHERE a = ? ORDER BY b DESC LIMIT -1 OFFSET ?")
    assert stmt.text == "SELECT id FROM t WHERE a = $1 ORDER BY b DESC OFFSET $2"
    assert to_postgres("SELECT 'LIMIT -1 OFFSET' FROM t LIMIT 5 OFFSET ?").text == \
        "SELECT 'LIMIT -1 OFFSET' FROM t LIMIT 5 OFFSET $1"
