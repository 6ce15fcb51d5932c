"""GetSession's reads sent together, for a backend where each statement is a round trip
(`traits.batched_reads`): the access check's rows, the session, the page, its head, and on the
first page the trigger context and the continuation edge go in one round trip, where one after
the other they were six, as three statements (the session with its access rows and head; the
page; the context and edge). Each part is the statement its own module reads alone (sessions, events,
trigger_firings, continuations), and the answer is built by the same functions, so it is the
answer the one-at-a-time reads give (tests/server/store/test_store_session_view.py compares
them on both backends).

The rows are only fetched before the access check, in the same snapshot: nothing of them is
decoded or returned unless `role` grants the read (the handler checks it between `fetch` and
`answer`)."""
from __future__ import annotations

from ..database.port import Conn
from . import continuations as continuations_q
from . import events as events_q
from . import history as history_q
from . import roles as roles_q
from . import sessions as sessions_q
from . import trigger_firings as firings_q
from .errors import NotFound

# The session's row with what decides access to it (its agent's flags, the caller's accepted
# grant: what roles.session_role reads in up to three statements) and the link of the page's last
# event as it will be unless the page is cut by size (seqs are dense, so the page of `limit` ends
# at min(last_seq, after + limit)): one statement.
_MAIN = ("SELECT a.account_id, a.public_read, a.public_chat IS NOT NULL, g.role, h.seq, h.link, s.*"
         " FROM (" + sessions_q.SESSION_ROW.replace("WHERE id = ?", "WHERE id = ?2") + ") AS s"
         " LEFT JOIN agents a ON a.id = s.agent_id"
         " LEFT JOIN agent_collaborators g ON g.agent_id = s.agent_id AND g.account_id = ?1 AND g.status = 'accepted'"
         " LEFT JOIN session_events h ON h.session_id = ?2"
         " AND h.seq = (SELECT min(last_seq, ?3) FROM sessions WHERE id = ?2)")
_SESSION_AT = 6   # where the session's columns start in a _MAIN row
# The first page's trigger context and continuation edge, one row (each part all NULL when none).
_FIRST = ("SELECT f.*, e.* FROM (SELECT 1) AS one"
          " LEFT JOIN (" + firings_q.CONTEXT_ROW.replace("?", "?1") + " LIMIT 1) AS f ON 1 = 1"
          " LEFT JOIN (" + continuations_q.SUCCESSOR_ROW.replace("?", "?1") + " LIMIT 1) AS e ON 1 = 1")
_CONTEXT_COLUMNS = 8   # firings_q.CONTEXT_ROW's


def fetch_each(conn: Conn, statements: list[tuple[str, tuple]]) -> list[list[tuple]]:
    """The rows of each statement: in one round trip where the backend batches reads."""
    if conn.traits.batched_reads:
        return conn.fetch_each(statements)   # type: ignore[attr-defined]
    return [conn.execute(sql, params).fetchall() for sql, params in statements]


def statements(account_id: str, session_id: str, after: int, limit: int, max_event: int,
               first_page: bool) -> list[tuple[str, tuple]]:
    """GetSession's statements, none depending on another's result."""
    found = [(_MAIN, (account_id, session_id, after + limit)),
             (events_q.PAGE_ROWS, (max_event, session_id, after, limit + 1))]
    if first_page:
        found.append((_FIRST, (session_id,)))
    return found


def role_of(account_id: str, found: list[list[tuple]]) -> str | None:
    """The caller's role on the session, as roles.session_role gives it, from the rows found."""
    main = found[0][0] if found[0] else None
    if main is None:
        return None
    agent_owner, public_read, public_chat, grant = main[:4]
    session = main[_SESSION_AT:]
    owner, agent_id, visitor = session[1], session[2], session[18]
    flags = None if agent_owner is None else (agent_owner, bool(public_read), bool(public_chat))
    return roles_q.role_through_agent(account_id, (owner, agent_id), visitor, flags, grant)[0]


def fetch(conn: Conn, account_id: str, session_id: str, after: int, limit: int, max_event: int,
          first_page: bool) -> tuple[str | None, list[list[tuple]]]:
    """(the caller's role on the session; the rows for `answer`), read on `conn`."""
    found = fetch_each(conn, statements(account_id, session_id, after, limit, max_event, first_page))
    return role_of(account_id, found), found


class MoreReads(Exception):
    """`answer` without a connection needs one more read (a page cut by size, whose head was not
    read ahead, or an event stored before events were bounded): read it all again on one."""


def answer(conn: Conn | None, session_id: str, found: list[list[tuple]], limit: int, max_bytes: int,
           max_event: int) -> tuple:
    """(session, page rows, more, trigger context, head, edge), as GetSession's reads one at a
    time give them, from what `fetch` found (once the role allows the read). `conn` None: the
    rows were read elsewhere (`aread_each`); MoreReads when one more read is needed."""
    main_rows, page, *first = found
    if not main_rows:
        raise NotFound(f"session {session_id} not found")
    main = main_rows[0]
    session = sessions_q.session_info(main[_SESSION_AT:])
    head_rows = [] if main[4] is None else [(main[4], main[5])]
    if conn is None and any(body is None for _seq, body in page):
        raise MoreReads("a stand-in")
    rows, more = events_q.page_of(conn, session_id, page, limit, max_bytes, max_event)
    head = None
    if rows:
        last = rows[-1][0]
        if head_rows and head_rows[0][0] == last:
            link = head_rows[0][1]
            head = (last, None if link is None else bytes(link))
        elif conn is None:
            raise MoreReads("the head of a page cut by size")
        else:   # the page was cut by size
            head = history_q.head_at(conn, session_id, last)
    context = edge = None
    if first:
        both = first[0][0]
        context_row, edge_row = both[:_CONTEXT_COLUMNS], both[_CONTEXT_COLUMNS:]
        context = firings_q.context_of(None if context_row[0] is None else context_row)
        edge = continuations_q.edge_of(None if edge_row[0] is None else edge_row)
    return session, rows, more, context, head, edge
