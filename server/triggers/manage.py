"""Creating and changing triggers inside a write job: what the CreateAgentTrigger and
UpdateAgentTrigger handlers and the agent's own `write ~/triggers/<name>` share (the checks
parsing cannot make, the per-agent bound, unique names, the first slot, the webhook secret).
Access is the caller's business; these functions take the owner's account."""
from __future__ import annotations

from seed_agents.protocol.api.actions_triggers import ACTIVITY_SOURCES, TriggerInput, TriggerPatch
from seed_agents.protocol.wire.errors import ProtocolError, quote
from seed_agents.protocol.agent.owner_fields import COLLABORATORS_PUBLISH

from ..clock import new_id
from ..store import agents as agents_q
from ..store import triggers as triggers_q
from . import schedule as sched
from . import webhook


def check_source(conn, owner: str, source: dict, agent_id: str, others: bool) -> None:
    """What parsing cannot know: that a zone or cron expression exists, that a named agent is
    the owner's (400 otherwise). A trigger acts on its own agent only: naming another of the
    account's agents (`run-completed` `agentId`) is for the owner in person (`others`), never a
    collaborator or the agent itself (403)."""
    if source["type"] == "schedule":
        try:
            sched.check(source["schedule"])
        except sched.ScheduleError as exc:
            raise ProtocolError(400, f"source.schedule: {exc}") from None
    if source["type"] == "run-completed" and "agentId" in source:
        if agents_q.agent_account(conn, source["agentId"]) != owner:
            raise ProtocolError(400, f"source.agentId {quote(source['agentId'])} is not an agent of this account")
        if source["agentId"] != agent_id and not others:
            raise ProtocolError(403, "source.agentId: only the agent's owner can watch another agent's runs; "
                                     "leave it out to watch this agent's own")


def publishes(continuation: dict | None) -> bool:
    """A `tool` continuation that writes to Seed (hm://, ipfs://): it publishes as the agent's
    identities, with no model involved."""
    if not continuation or continuation.get("kind") != "tool" or continuation.get("tool") != "write":
        return False
    address = (continuation.get("input") or {}).get("address")
    return isinstance(address, str) and address.strip().startswith(("hm://", "ipfs:"))


def check_continuation(conn, agent_id: str, continuation: dict | None, collaborator: bool) -> None:
    """A collaborator's trigger may publish as the owner's identities only with the owner's
    say-so (`collaboratorsPublish`), as a collaborator's `write hm://` in person may (403)."""
    if not collaborator or not publishes(continuation):
        return
    agent = agents_q.get_agent(conn, agent_id)
    if agent is None or (agent.get("definition") or {}).get(COLLABORATORS_PUBLISH) is not True:
        raise ProtocolError(403, "continuation: a trigger that publishes (write hm:// or ipfs://) as the agent's "
                                 f"identities is the owner's to make, unless the agent's definition sets "
                                 f"{COLLABORATORS_PUBLISH}")


def first_due(source: dict, enabled: bool, now: int) -> int | None:
    if not enabled or source["type"] != "schedule":
        return None
    return sched.first_slot(source["schedule"], now)


def create(conn, ctx, owner: str, agent_id: str, spec: TriggerInput, now: int, secret: str | None, *,
           others: bool = False, collaborator: bool = False) -> dict:
    """`others`: the caller is the owner in person (see check_source); `collaborator`: a writer in
    person (see check_continuation)."""
    check_source(conn, owner, spec.source, agent_id, others)
    check_continuation(conn, agent_id, spec.continuation, collaborator)
    limit = ctx.config.trigger_max_per_agent
    if triggers_q.count_of_agent(conn, agent_id) >= limit:
        raise ProtocolError(409, f"agent {agent_id} has {limit} triggers, the most it may have (delete one first)")
    if triggers_q.name_taken(conn, agent_id, spec.name):
        raise ProtocolError(409, f"agent {agent_id} already has a trigger named {quote(spec.name)}")
    trigger_id = new_id()
    trigger = triggers_q.create_trigger(conn, trigger_id, owner, agent_id, spec.name, spec.enabled, spec.source,
                                        spec.prompt, spec.continuation, now,
                                        first_due(spec.source, spec.enabled, now))
    if spec.source["type"] == "webhook":
        webhook.store_secret(conn, ctx.secrets, trigger_id, owner, secret or webhook.new_secret(), now)
    return trigger


def update(conn, ctx, before: dict, patch: TriggerPatch, now: int, secret: str | None, *,
           others: bool = False, collaborator: bool = False) -> dict:
    refuse_retired(before)
    if patch.source is not None:
        check_source(conn, before["account"], patch.source, before["agentId"], others)
    check_continuation(conn, before["agentId"], patch.continuation, collaborator)
    if patch.name is not None and triggers_q.name_taken(conn, before["agentId"], patch.name, but=before["id"]):
        raise ProtocolError(409, f"agent {before['agentId']} already has a trigger named {quote(patch.name)}")
    source = patch.source or before["source"]
    enabled = before["enabled"] if patch.enabled is None else patch.enabled
    # A new source, or a trigger turned back on, starts its schedule from now (what was missed
    # while it was off is not fired).
    retime = patch.source is not None or enabled != before["enabled"]
    trigger = triggers_q.update_trigger(conn, before["id"], now, name=patch.name, enabled=patch.enabled,
                                        source=patch.source, prompt=patch.prompt, continuation=patch.continuation,
                                        next_due_at=first_due(source, enabled, now), retime=retime)
    if source["type"] == "webhook" and triggers_q.credentials(conn, before["id"]) is None:
        webhook.store_secret(conn, ctx.secrets, before["id"], before["account"], secret or webhook.new_secret(), now)
    return trigger


def refuse_retired(trigger: dict) -> None:
    """A trigger combined into another (`mergedInto`) is kept as it was, with its firings: 409."""
    if trigger.get("mergedInto"):
        raise ProtocolError(409, f"trigger {quote(trigger['name'])} was combined into trigger {trigger['mergedInto']}: "
                                 "it keeps its history and cannot be changed or fired (change the survivor)")


MAX_MERGED = 16   # alternatives of one activity source (protocol ACTIVITY alternatives bound)


def merge(conn, survivor: dict, retired: dict, take: str, now: int) -> tuple[dict, dict]:  # noqa: ANN001
    """Combine `retired` into `survivor` (the storage design's merged_into), in the caller's
    transaction: the survivor's source becomes `activity` with both triggers' conditions as
    alternatives (an activity source brings its own), and it takes the chosen trigger's action
    (prompt and continuation); the retired one is disabled, marked and keeps its firings; its
    claims are imported so no event it admitted fires the survivor again."""
    for t in (survivor, retired):
        refuse_retired(t)
        if t["source"]["type"] not in ACTIVITY_SOURCES:
            raise ProtocolError(400, f"only activity triggers combine; trigger {quote(t['name'])} has a "
                                     f"{t['source']['type']} source")
    if survivor["agentId"] != retired["agentId"]:
        raise ProtocolError(400, "triggers of two agents cannot combine: both must be the same agent's")
    alternatives: list[dict] = []
    for t in (survivor, retired):
        source = t["source"]
        own = source["alternatives"] if source["type"] == "activity" else [{"id": t["name"], "source": source}]
        for alt in own:
            alt_id, n = alt["id"], 2
            while any(a["id"] == alt_id for a in alternatives):
                alt_id, n = f"{alt['id']}-{n}", n + 1
            alternatives.append({"id": alt_id, "source": alt["source"]})
    if len(alternatives) > MAX_MERGED:
        raise ProtocolError(400, f"combined, the triggers would have {len(alternatives)} conditions; an activity "
                                 f"trigger holds at most {MAX_MERGED}")
    # The chosen action: the survivor's own, or the retired one's (its continuation, the default
    # newThread when it had none, replacing the survivor's).
    prompt, continuation = survivor["prompt"], None
    if take == "retired":
        prompt, continuation = retired["prompt"], retired.get("continuation") or {"kind": "newThread"}
    updated = triggers_q.update_trigger(conn, survivor["id"], now, source={"type": "activity",
                                                                           "alternatives": alternatives},
                                        prompt=prompt, continuation=continuation)
    gone = triggers_q.retire_into(conn, retired["id"], survivor["id"], now)
    assert updated is not None and gone is not None
    return updated, gone
