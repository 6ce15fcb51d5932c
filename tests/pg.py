"""PostgreSQL for tests: `SEED_AGENTS_TEST_POSTGRES_URL` (set by .ci/run), one fresh schema per test.

Import the fixtures into a test module (`from tests.pg import postgres_url  # noqa: F401`).
Where no PostgreSQL can be reached the test is skipped with the reason; under CI (CI=true) it
fails instead, so a CI run can never pass by skipping every PostgreSQL test.
"""
from __future__ import annotations

import os
import uuid
from urllib.parse import quote

import pytest

PG_URL_ENV = "SEED_AGENTS_TEST_POSTGRES_URL"


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"PostgreSQL is required under CI but {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL: {reason}")


def with_schema(url: str, schema: str) -> str:
    """`url` whose connections use `schema` first (libpq's `options` parameter)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-c search_path={schema}', safe='')}"


@pytest.fixture(scope="session")
def postgres_base_url() -> str:
    from seed_agents.server.database.url import StorageURLError, parse_storage_url

    url = os.environ.get(PG_URL_ENV, "").strip()
    if not url:
        unavailable(f"set {PG_URL_ENV} (postgresql://USER:PASSWORD@HOST/DB) or run .ci/run, which "
                    "starts a cluster and sets it")
    try:
        shown = parse_storage_url(url)
    except StorageURLError as exc:
        unavailable(f"{PG_URL_ENV} is not a usable URL: {exc}")
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception as exc:  # ImportError or any connection failure: say which, without secrets
        unavailable(f"cannot connect to {shown} ({type(exc).__name__})")
    return url


@pytest.fixture
def postgres_url(postgres_base_url):
    """A URL whose connections work in a new, empty schema, dropped after the test."""
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(postgres_base_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_schema(postgres_base_url, schema)
    finally:
        with psycopg.connect(postgres_base_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
