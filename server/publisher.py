"""What the runtime and its tools may tell the world: the publishing half of the app, handed to
the runtime (and by it to each tool's context) so that neither reaches into the app
(server/live/broadcaster.Broadcaster is the one implementation). It imports nothing of the server, so
every layer below the app may name it."""
from __future__ import annotations

from typing import Protocol


class Publisher(Protocol):
    def publish_append(self, session_id: str, event: dict, body: bytes) -> None:
        """A durable event (with its stored bytes) of the session."""

    def publish_partial(self, session_id: str, partial_id: str, patch: dict) -> None:
        """An `appendPartial` of a reply being streamed."""

    def publish_run(self, run: dict) -> None:
        """A RunInfo after a change."""

    def publish_run_partial(self, run: dict, patch: dict) -> None:
        """A live-only piece of a run's progress ({progress: {fraction?, label?}}) on its tree's key."""

    def publish_session(self, session: dict, *, created: bool = False) -> None:
        """A SessionInfo after a change (or its creation: a delegated child's session)."""

    def publish_agent(self, agent: dict, *, created: bool = False) -> None:
        """An AgentInfo after a change (or its creation)."""

    def publish_journal(self, run: dict, entry: dict) -> None:
        """A run journal entry (RunJournalEntryInfo) of `run`, on its tree's key."""

    def notify_account(self, account_id: str, reason: str, *, agent_id: str | None = None,
                       session_id: str | None = None) -> None:
        """An account notice."""
