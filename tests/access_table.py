"""The access matrix's expectations (tests/server/handlers/test_access_matrix.py): one row per cell of verb,
address form (or callable tool, or action) and case, one column per role. The lists of forms,
verbs, callables, owner-only fields, trigger continuations and roles are read from the code by
the test, which fails when one has no row here (or a row has no column for a role).

Roles: the person roles, each calling `InvokeSessionTool` (or the action) on a session of the
shared agent A, except `public`, who reads the public agent P's session (public read on),
`stranger`, who has no role on A, and `visitor`, who has no role on agent V but chats with it
(public chat open) in a session of its own and calls on that; then the agent acting as itself: `model` (a turn of A),
`trigger` (a `tool` continuation of a trigger of A, fired by its webhook), `child` (a run A's
model delegated to) and `workflow` (a script child A's model delegated, each cell a `ctx.call`;
the turn's own verbs are not offered to it: its children come through ctx.delegate), and
`visiting`: V's turn in the visitor's session, offered `call` with the tools P's owner granted
visitors (tests/authority_world.VISITOR_TOOLS) and nothing else. docs/architecture.md "Whose authority a tool call runs with" says why.

Outcomes:
- `ok`: answered without an error;
- `ran`: the tool ran (answered, or its own error: a page out of reach of the network policy);
- `hidden`: the item is not there for this caller (answered as a missing id is);
- `refused`: the tool refused for the owner's sake (their say-so to publish, their other agents,
  a tool they did not grant visitors);
- `denied`: the tool refused: the role on the agent is too low;
- `unwritable`: the form does not take this verb;
- `not-yet`: the form's part lands later on this server;
- `not-offered`: the verb is not offered in this kind of session (continue_session in a child,
  anything but `call` in a visitor's);
- `unrunnable`: a trigger's `tool` continuation cannot run this verb headless (its firing fails);
- `400`, `403`, `404`: the action itself was refused with that status;
- `n/a`: the role cannot make this call (the agent does not send actions).

Inputs are templates: `{name}` is one of the world's ids (tests/authority_world.py), `{role}`
the role's own name.
"""
from __future__ import annotations

import json

COLUMNS = "owner writer reader public stranger visitor model trigger child workflow visiting"

_TRIGGER = json.dumps({"source": {"type": "webhook"}, "prompt": "p"})
_WATCH_B = json.dumps({"source": {"type": "run-completed", "agentId": "{b}"}, "prompt": "p"})
# an authored tool (code in the sandbox: the agent's `execute` grant, tests/authority_world.py's
# agent A holds every grant)
_LAMBDA = json.dumps({"description": "Doubles.", "runtime": "python", "input": {"type": "object"},
                      "source": "def main(input):\n    return {'twice': 2 * input.get('n', 1)}\n"})

# a script child (a workflow) with nothing to do
_SCRIPT = "export default async function (input, ctx) {{ return 'matrix'; }}"   # (a template: {{ is {)

# (verb, form or callable, case, input, outcomes by COLUMNS)
TOOL_CELLS = [
    # read: every form
    ("read", "~/memory", "file", {"address": "~/memory/notes/a.md"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    ("read", "~/tools", "list", {"address": "~/tools"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    ("read", "~/self", "self", {"address": "~/self"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    ("read", "~/triggers", "list", {"address": "~/triggers/"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    ("read", "thread:", "list", {"address": "thread:"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    ("read", "thread:", "shared agent's", {"address": "thread:{sa}"}, "ok ok ok hidden 404 403 ok ok ok ok not-offered"),
    ("read", "thread:", "private agent's", {"address": "thread:{sb}"},
     "ok hidden hidden hidden 404 403 hidden hidden hidden hidden not-offered"),
    ("read", "run:", "shared agent's", {"address": "run:{ra}"}, "ok ok ok hidden 404 403 ok ok ok ok not-offered"),
    ("read", "run:", "private agent's", {"address": "run:{rb}"}, "ok hidden hidden hidden 404 403 hidden hidden hidden hidden not-offered"),
    # (an attachment of session SA: the agent's own turns run in sessions of their own)
    ("read", "attachment:", "session SA's", {"address": "attachment:{att}"},
     "ok ok ok hidden 404 403 hidden hidden hidden hidden not-offered"),
    ("read", "hm://", "document", {"address": "{doc}"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    ("read", "activity:", "feed", {"address": "activity:"}, "ok ok ok ok 404 403 ok ok ok ok not-offered"),
    # (reading a CID stores it in memory: a writer's; this identity CID is refused by the tool)
    ("read", "ipfs://", "cid", {"address": "ipfs://bafkqaaa"}, "ran ran denied denied 404 403 ran ran ran ran not-offered"),
    ("read", "https://", "page", {"address": "{page}"}, "ran ran ran ran 404 403 ran ran ran ran not-offered"),
    # write: every form (a reader's write is refused by the action: 403)
    ("write", "~/memory", "file", {"address": "~/memory/notes/{role}.md", "content": "x"}, "ok ok 403 403 404 403 ok ok ok ok not-offered"),
    ("write", "~/tools", "tool", {"address": "~/tools/t-{role}", "content": _LAMBDA},
     "ok ok 403 403 404 403 ok ok ok ok not-offered"),
    ("write", "~/self", "self", {"address": "~/self", "content": "x"},
     "unwritable unwritable 403 403 404 403 unwritable unwritable unwritable unwritable not-offered"),
    ("write", "~/triggers", "own agent", {"address": "~/triggers/t-{role}", "content": _TRIGGER},
     "ok ok 403 403 404 403 ok ok ok ok not-offered"),
    ("write", "~/triggers", "watching agent B", {"address": "~/triggers/w-{role}", "content": _WATCH_B},
     "ok refused 403 403 404 403 refused refused refused refused not-offered"),
    ("write", "thread:", "-", {"address": "thread:{sa}", "content": "x"},
     "unwritable unwritable 403 403 404 403 unwritable unwritable unwritable unwritable not-offered"),
    ("write", "run:", "-", {"address": "run:{ra}", "content": "x"},
     "unwritable unwritable 403 403 404 403 unwritable unwritable unwritable unwritable not-offered"),
    ("write", "attachment:", "-", {"address": "attachment:{att}", "content": "x"},
     "unwritable unwritable 403 403 404 403 unwritable unwritable unwritable unwritable not-offered"),
    ("write", "hm://", "publish", {"address": "{doc}-{role}", "content": "x"}, "ok refused 403 403 404 403 ok ok ok ok not-offered"),
    # a draft is the agent's, kept here: whoever may publish as it may keep one (the same grant)
    ("write", "hm://", "draft", {"address": "{doc}-{role}", "content": "x",
                                 "options": {"action": "draft.create", "name": "D"}},
     "ok refused 403 403 404 403 ok ok ok ok not-offered"),
    ("write", "activity:", "-", {"address": "activity:", "content": "x"},
     "unwritable unwritable 403 403 404 403 unwritable unwritable unwritable unwritable not-offered"),
    ("write", "ipfs://", "cid", {"address": "ipfs://bafkqaaa", "content": "x"}, "ran ran 403 403 404 403 ran ran ran ran not-offered"),
    ("write", "https://", "page", {"address": "{page}", "content": "x"},
     "unwritable unwritable 403 403 404 403 unwritable unwritable unwritable unwritable not-offered"),
    # call: every callable this server offers, and its own (search_memory)
    ("call", "search", "Seed", {"tool": "search", "input": {"query": "kites"}}, "ran ran 403 403 404 403 ran ran ran ran refused"),
    ("call", "search_memory", "memory", {"tool": "search_memory", "input": {"query": "kites"}},
     "ok ok 403 403 404 403 ok ok ok ok refused"),
    ("call", "web_search", "query", {"tool": "web_search", "input": {"query": "kites"}}, "ran ran 403 403 404 403 ran ran ran ran refused"),
    ("call", "navigate", "page", {"tool": "navigate", "input": {"url": "{page}"}}, "ran ran 403 403 404 403 ran ran ran ran ran"),
    ("call", "navigate", "document", {"tool": "navigate", "input": {"url": "{doc}"}}, "ok ok 403 403 404 403 ok ok ok ok ok"),
    # code in the sandbox runs as the agent, under its grants; a person's call needs write access
    ("call", "execute", "shell", {"tool": "execute", "input": {"runtime": "shell", "code": "echo {role}"}},
     "ok ok 403 403 404 403 ok ok ok ok refused"),
    ("call", "double", "authored tool", {"tool": "double", "input": {"n": 2}}, "ok ok 403 403 404 403 ok ok ok ok refused"),
    # a tool of the owner's MCP server the agent picked (its secret header the owner's): as the agent's
    # other tools, the agent and a person who may write to it; the server's answer is the result
    ("call", "calc__add", "the agent's MCP tool", {"tool": "calc__add", "input": {"a": 2, "b": 40}},
     "ok ok 403 403 404 403 ok ok ok ok ok"),
    # the session's own verbs: not a person's (InvokeSessionTool takes read, write and call)
    ("plan", "-", "steps", {"title": "t", "steps": [{"id": "s1", "label": "x", "status": "done"}]},
     "400 400 400 400 400 400 ok ok ok ok not-offered"),
    ("status", "-", "title", {"title": "Matrix"}, "400 400 400 400 400 400 ok ok ok ok not-offered"),
    # The verbs of a model's turn (surface.TURN_VERBS): never a person's nor a trigger's. delegate in
    # each of its modes (delegation_tools.MODES): the child runs as the caller's agent, or as another
    # agent of the same account under that agent's own grants; another account's agent is not there.
    ("delegate", "brief", "a child as itself", {"title": "self", "brief": "matrix delegate {role} self"},
     "400 400 400 400 400 400 ok unrunnable ok not-offered not-offered"),
    ("delegate", "agentId", "the account's agent B", {"title": "as B", "brief": "matrix delegate {role} b",
                                                     "agentId": "{b}"}, "400 400 400 400 400 400 ok unrunnable ok not-offered not-offered"),
    ("delegate", "agentId", "another account's agent", {"brief": "matrix delegate {role} x", "agentId": "{x}"},
     "400 400 400 400 400 400 hidden unrunnable hidden not-offered not-offered"),
    ("delegate", "prompt", "a persona", {"brief": "matrix delegate {role} persona", "prompt": "You are terse."},
     "400 400 400 400 400 400 ok unrunnable ok not-offered not-offered"),
    ("delegate", "await:false", "detached", {"brief": "matrix delegate {role} detached", "await": False},
     "400 400 400 400 400 400 ok unrunnable ok not-offered not-offered"),
    ("delegate", "script", "a script child", {"title": "script {role}", "script": _SCRIPT},
     "400 400 400 400 400 400 ok unrunnable ok not-offered not-offered"),
    # continue_session: a top-level conversation's own turn only (a successor session of the agent)
    ("continue_session", "-", "handoff", {"handoff": "matrix handoff {role}", "title": "matrix {role} part two"},
     "400 400 400 400 400 400 ok unrunnable not-offered not-offered not-offered"),
]

# (action, case, outcomes of the person roles: owner writer reader public stranger)
ACTION_CELLS = [
    ("UpdateAgent", "name", "ok ok 403 403 404 403"),
    ("UpdateAgent", "signingKey", "ok 403 403 403 404 403"),
    ("UpdateAgent", "signingKeys", "ok 403 403 403 404 403"),
    ("UpdateAgent", "mcpServers", "ok 403 403 403 404 403"),
    ("UpdateAgent", "collaboratorsPublish", "ok 403 403 403 404 403"),
    ("UpdateAgent", "tools (the publish grant off)", "ok 403 403 403 404 403"),
    ("UpdateAgent", "tools (other grants, publish kept)", "ok ok 403 403 404 403"),
    # a session's delegation preset (never past the server's limits): a writer's, as its title
    ("UpdateSession", "thoroughness", "ok ok 403 403 404 403"),
    ("SignalRun", "a run of the agent", "ok ok 403 403 404 404"),
    ("SignalRun", "a run of private agent B", "ok 404 404 404 404 404"),
    # combining two activity triggers of the agent (the storage design's merged_into): a writer's
    ("MergeAgentTriggers", "two activity triggers of the agent", "ok ok 403 403 404 403"),
    ("CreateAgentTrigger", "continuation newThread", "ok ok 403 403 404 403"),
    ("CreateAgentTrigger", "continuation wake", "ok ok 403 403 404 403"),
    ("CreateAgentTrigger", "continuation tool", "ok ok 403 403 404 403"),
    ("CreateAgentTrigger", "run-completed of agent B", "ok 403 403 403 404 403"),
    ("CreateAgentTrigger", "a tool continuation publishing", "ok 403 403 403 404 403"),
    # Subscription sign-in: an account's own logins only (another's loginId is not found). The
    # owner's submit reaches the world's token endpoint, a closed loopback port: 502.
    ("StartProviderOAuth", "the caller's own", "ok ok ok ok ok ok"),
    ("GetProviderOAuthStatus", "the owner's login", "ok 404 404 404 404 404"),
    ("SubmitProviderOAuthCode", "the owner's login", "502 404 404 404 404 404"),
    ("CancelProviderOAuth", "the owner's login", "ok 404 404 404 404 404"),
]
