"""Whose authority a tool call runs with (docs/architecture.md "Whose authority a tool call runs
with"): decided once where the request enters, carried in the tool context, asked by every
address form.

- `model`: the agent's own calls in a turn, as the agent, under its grants. The agent's data
  belongs to its owner, so `account` is the owner's.
- `user`: a person's `InvokeSessionTool`: that person's account and role on the agent (owner,
  writer, reader: public read makes anyone a reader), within the agent's grants.
- `trigger`: a trigger's `tool` continuation, as the trigger's agent (what `model` may do).
- `child`: a delegated run, as its parent's agent, narrowed to the tools its spawner named.
- `workflow`: a script child's `ctx.call`, as `child` (its parent's agent, narrowed to the tools
  its spawner named): whoever started the parent turn lends it no more than the agent has.

Pure: what the store says (the role, whether the agent is shared) is read by whoever builds it.
"""
from __future__ import annotations

from dataclasses import dataclass

OWNER, WRITER, READER = "owner", "writer", "reader"
ROLES = (OWNER, WRITER, READER)
_RANK = {READER: 1, WRITER: 2, OWNER: 3}
VIAS = ("model", "user", "trigger", "child", "workflow")
AGENT_VIAS = ("model", "trigger", "child", "workflow")   # the agent acting as itself


def may_write(role: str | None) -> bool:
    """Whether a role may change the session, the agent or the world (a reader's may not)."""
    return role is not None and _RANK.get(role, 0) >= _RANK[WRITER]


@dataclass(frozen=True)
class Authority:
    account: str                   # who the call runs for: the person (user), else the agent's owner
    role: str                      # that account's role on the agent (the agent itself: owner)
    via: str                       # model | user | trigger | child | workflow
    agent_id: str
    owner: str                     # the agent's owner (whose store rows the agent's tools touch)
    grants: tuple[str, ...] = ()   # the registry's callables this call may reach (the agent's, narrowed)
    shared: bool = False           # anyone besides the owner may drive the agent (collaborators, public read)

    def __post_init__(self) -> None:
        if self.role not in _RANK or self.via not in VIAS:
            raise ValueError(f"not an authority: role {self.role!r} via {self.via!r}")

    @classmethod
    def of_agent(cls, agent: dict, via: str, grants: tuple[str, ...] = (), shared: bool = False) -> "Authority":
        """The agent acting as itself (its model, a trigger of it, a child run of it)."""
        if via not in AGENT_VIAS:
            raise ValueError(f"{via!r} is not the agent acting as itself")
        return cls(agent["account"], OWNER, via, agent["id"], agent["account"], tuple(grants), shared)

    @classmethod
    def of_person(cls, account: str, role: str, agent: dict, grants: tuple[str, ...] = (),
                  shared: bool = False) -> "Authority":
        """A person running a verb on a session of the agent (InvokeSessionTool)."""
        return cls(account, role, "user", agent["id"], agent["account"], tuple(grants), shared)

    def at_least(self, need: str) -> bool:
        return _RANK[self.role] >= _RANK[need]

    @property
    def in_person(self) -> bool:
        return self.via == "user"

    @property
    def owner_in_person(self) -> bool:
        """The agent's owner, themself: may name the account's other agents and publish as the
        owner's identities without the agent's say-so."""
        return self.via == "user" and self.role == OWNER

    @property
    def sees_account(self) -> bool:
        """Whether `thread:` and `run:` reach the owner's conversations with every agent: for the
        owner in person, and for the agent itself while nobody else can drive it. Otherwise only
        the sessions and runs of this agent that the account may read (a collaborator must not
        read the owner's other agents through this one, in person or through its model)."""
        return self.role == OWNER and (self.via == "user" or not self.shared)
