"""The storage URL: sqlite:FILE or postgresql://..., and a password never shown."""
from __future__ import annotations

import logging

import pytest

from seed_agents.server.database import database_for
from seed_agents.server.database.url import StorageURLError, parse_storage_url, scrub, sqlite_url

SECRET = "s3cr3t-Pa55"


def test_sqlite_forms():
    assert parse_storage_url("sqlite:./data/agents.sqlite").path == "./data/agents.sqlite"
    assert parse_storage_url("sqlite:/var/lib/seed/agents.sqlite").path == "/var/lib/seed/agents.sqlite"
    assert parse_storage_url("sqlite:///var/lib/seed/a.sqlite").path == "/var/lib/seed/a.sqlite"
    assert parse_storage_url("SQLITE:relative.db").path == "relative.db"
    url = sqlite_url("data/agents.sqlite")
    assert url.is_sqlite and str(url) == "sqlite:data/agents.sqlite"


@pytest.mark.parametrize("text, words", [
    (None, "missing"), ("", "missing"), ("   ", "missing"),
    ("sqlite:", "needs a file path"), ("sqlite://", "needs a file path"),
    ("sqlite://otherhost/x.db", "names a host"),
    ("agents.sqlite", "no scheme"),
    ("mysql://root:pw@127.0.0.1/db", "'mysql' is not supported"),
    ("postgresql://", "names no host"),
    (f"postgresql://u:{SECRET}@127.0.0.1:notaport/db", "malformed host or port"),
    (f"postgresql://u:{SECRET}@127.0.0.1:99999/db", "malformed host or port"),
])
def test_bad_urls_are_refused_clearly_without_the_password(text, words):
    with pytest.raises(StorageURLError) as info:
        parse_storage_url(text)
    assert words in str(info.value)
    assert SECRET not in str(info.value) and "pw@" not in str(info.value)


def test_a_postgresql_password_is_redacted_everywhere_but_dsn(caplog):
    text = f"postgresql://seed:{SECRET}@db.internal:5433/agents?sslmode=require&password={SECRET}2"
    url = parse_storage_url(text)
    assert url.is_postgresql and url.dsn() == text
    shown = [str(url), repr(url), url.display, f"{url}", "%s" % url]
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("opening %s (%r)", url, url)
    shown.append(caplog.text)
    for form in shown:
        assert SECRET not in form
    assert str(url) == "postgresql://seed:***@db.internal:5433/agents?sslmode=require&password=***"
    assert parse_storage_url("postgres://seed@127.0.0.1/agents").display == "postgresql://seed@127.0.0.1/agents"
    assert parse_storage_url("postgresql:///agents?host=/run/postgresql").is_postgresql  # a socket dir
    # An error text that happened to echo the password is scrubbed before it is shown.
    assert scrub(f"FATAL: bad password {SECRET} for seed", url) == "FATAL: bad password *** for seed"


def test_a_percent_encoded_password_is_scrubbed_in_both_forms():
    url = parse_storage_url("postgresql://seed:p%40ss%2Fword@127.0.0.1/agents")
    assert "p%40ss" not in str(url)
    assert scrub("p@ss/word and p%40ss%2Fword", url) == "*** and ***"


def test_the_url_picks_the_facade_without_connecting(tmp_path):
    from types import SimpleNamespace

    from seed_agents.server.database.postgres.database import PgDatabase
    from seed_agents.server.database.sqlite.database import Database

    lite = database_for(SimpleNamespace(storage_url=parse_storage_url(f"sqlite:{tmp_path / 'a.sqlite'}"),
                                        db_path=str(tmp_path / "a.sqlite")))
    assert isinstance(lite, Database) and lite.path == str(tmp_path / "a.sqlite")
    assert (lite.shared, lite.backend) == (False, "sqlite")
    pg = database_for(SimpleNamespace(storage_url=parse_storage_url(f"postgresql://u:{SECRET}@127.0.0.1/x"),
                                      db_path=str(tmp_path / "unused.sqlite")))
    assert isinstance(pg, PgDatabase) and (pg.shared, pg.backend) == (True, "postgresql")
    assert SECRET not in pg.path and SECRET not in repr(pg.url)
    default = database_for(SimpleNamespace(storage_url=None, db_path=str(tmp_path / "b.sqlite")))
    assert isinstance(default, Database) and default.path == str(tmp_path / "b.sqlite")


def test_redact_shows_any_refused_input_without_its_password():
    from seed_agents.server.database.url import redact

    assert redact(f"mysql://root:{SECRET}@db/x") == "mysql://root:***@db/x"
    assert redact(f"postgres://u:{SECRET}@h:notaport/d?sslpassword={SECRET}") == \
        "postgres://u:***@h:notaport/d?sslpassword=***"
    assert redact("postgresql://seed@h/d") == "postgresql://seed@h/d"  # a user name is not a secret
    assert redact("sqlite:") == "sqlite:" and redact("agents.sqlite") == "agents.sqlite"
    assert redact(f"http://u:{SECRET}@[::1/x") == "(a URL that cannot be parsed)"
