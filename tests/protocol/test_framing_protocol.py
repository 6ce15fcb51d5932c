"""The three framings implement the declared Framing protocols (protocol/wire/framing_types.py): every
member is there, with the protocol's parameters in the same order."""
from __future__ import annotations

import inspect

import pytest

from seed_agents.protocol.wire import framing_types as ft
from seed_agents.protocol.wire.framing_http import HttpFraming
from seed_agents.protocol.wire.framing_v1 import V1Framing
from seed_agents.protocol.wire.framing_v2 import V2Framing


def _members(protocol) -> dict:
    out = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object,) or not getattr(klass, "_is_protocol", False) or klass.__name__ == "Protocol":
            continue
        out.update({k: v for k, v in vars(klass).items() if not k.startswith("_")})
        out.update({k: None for k in getattr(klass, "__annotations__", {})})
    return out


def _params(fn) -> list[str]:
    """Parameter names after self; a positional-only one may have any name ("*")."""
    fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    return ["*" if p.kind is p.POSITIONAL_ONLY else name
            for name, p in inspect.signature(fn).parameters.items() if name != "self"]


@pytest.mark.parametrize("framing, protocol", [
    (V1Framing(max_frame=1 << 20), ft.SocketFraming),
    (V2Framing(max_frame=1 << 20, max_depth=64), ft.SocketFraming),
    (HttpFraming(max_frame=1 << 20, max_depth=64), ft.HttpMessages),
])
def test_each_framing_implements_its_protocol(framing, protocol):
    members = _members(protocol)
    assert {"read", "refusal", "name"} <= set(members)
    for name, declared in members.items():
        assert hasattr(framing, name), f"{type(framing).__name__} lacks {name}"
        if callable(declared) or isinstance(declared, staticmethod):
            have = _params(getattr(type(framing), name))
            want = _params(declared)
            assert len(have) >= len(want) and all(w in ("*", h) for w, h in zip(want, have)), \
                f"{type(framing).__name__}.{name}{have} != {want}"


def test_the_names_say_what_each_method_does():
    """`reply` (a socket's answer to one request) and `http_message` (any HTTP message) are not
    one name with two meanings."""
    assert not hasattr(V2Framing, "answer") and not hasattr(V1Framing, "answer")
    assert not hasattr(HttpFraming, "answer")
