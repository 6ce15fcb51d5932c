"""Parsers of the lifecycle actions: typed values, and a 400 naming the field for each fault."""
from __future__ import annotations

import pytest

from seed_agents.protocol.api import actions as A
from seed_agents.protocol.api.actions import parse_action

from tests.protocol.test_protocol_actions import act, refused

DEF = {"name": "n", "systemPrompt": "", "modelProvider": "echo", "model": "m"}


def test_update_and_delete_agent():
    parsed = parse_action(act("UpdateAgent", agentId="a", definition={**DEF, "extra": [1]}))
    assert parsed == A.UpdateAgent(parsed.ts, "a", {**DEF, "extra": [1]}, "echo")
    refused(act("UpdateAgent", definition=DEF), "UpdateAgent.agentId")
    refused(act("UpdateAgent", agentId="a"), "UpdateAgent.definition")
    refused(act("UpdateAgent", agentId="a", definition={**DEF, "model": ""}), "UpdateAgent.definition.model")
    assert parse_action(act("DeleteAgent", agentId="a")).agent_id == "a"
    refused(act("DeleteAgent", agentId="x" * 201), "DeleteAgent.agentId", "200")


def test_update_session_tells_absent_from_null():
    absent = parse_action(act("UpdateSession", sessionId="s", title="t"))
    assert (absent.title, absent.set_model_override, absent.model_override) == ("t", False, None)
    cleared = parse_action(act("UpdateSession", sessionId="s", modelOverride=None))
    assert (cleared.title, cleared.set_model_override, cleared.model_override) == (None, True, None)
    override = {"provider": "p", "model": "m", "reasoningLevel": "high", "ignored": 1}
    parsed = parse_action(act("UpdateSession", sessionId="s", modelOverride=override))
    assert parsed.model_override == {"provider": "p", "model": "m", "reasoningLevel": "high"}
    refused(act("UpdateSession", sessionId="s"), "UpdateSession.title", "modelOverride")
    refused(act("UpdateSession", sessionId="s", title=""), "UpdateSession.title")
    refused(act("UpdateSession", sessionId="s", modelOverride=[]), "UpdateSession.modelOverride")
    refused(act("UpdateSession", sessionId="s", modelOverride={"model": "m"}), "UpdateSession.modelOverride.provider")
    refused(act("UpdateSession", sessionId="s", modelOverride={"provider": "p", "model": "m", "reasoningLevel": 3}),
            "UpdateSession.modelOverride.reasoningLevel")


@pytest.mark.parametrize("name, field", [("DeleteSession", "sessionId"), ("RetrySession", "sessionId"),
                                         ("GetRun", "runId"), ("CancelRun", "runId")])
def test_id_actions(name, field):
    assert getattr(parse_action(act(name, **{field: "x"})), "session_id" if field == "sessionId" else "run_id") == "x"
    refused(act(name), f"{name}.{field}")
    refused(act(name, **{field: 1}), f"{name}.{field}")


def test_list_runs_needs_exactly_one_selector():
    parsed = parse_action(act("ListRuns", rootRunId="r", status="canceled", limit=5))
    assert (parsed.selector, parsed.target, parsed.status, parsed.limit) == ("rootRunId", "r", "canceled", 5)
    refused(act("ListRuns"), "exactly one")
    refused(act("ListRuns", sessionId="s", agentId="a"), "exactly one", "sessionId, agentId")
    refused(act("ListRuns", agentId="a", status="done"), "ListRuns.status")
    refused(act("ListRuns", agentId="a", limit=0), "ListRuns.limit")


def test_list_sessions_lineage_and_cursor():
    parsed = parse_action(act("ListSessions", parentSessionId="p", includeChildren=False,
                              cursor={"updatedBefore": 0, "idBefore": ""}))
    assert (parsed.parent_session_id, parsed.include_children, parsed.cursor) == (
        "p", False, {"updatedBefore": 0, "idBefore": ""})
    assert parse_action(act("ListSessions")).include_children is True
    refused(act("ListSessions", includeChildren=0), "ListSessions.includeChildren")
    refused(act("ListSessions", cursor="c"), "ListSessions.cursor")
    refused(act("ListSessions", cursor={"idBefore": "x"}), "ListSessions.cursor.updatedBefore")
    refused(act("ListSessions", cursor={"updatedBefore": -1, "idBefore": "x"}), "ListSessions.cursor.updatedBefore")
    refused(act("ListSessions", cursor={"updatedBefore": 1, "idBefore": 2}), "ListSessions.cursor.idBefore")


def test_delete_model_provider():
    assert parse_action(act("DeleteModelProvider", name="p")).name == "p"
    refused(act("DeleteModelProvider"), "DeleteModelProvider.name")
