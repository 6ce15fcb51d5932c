"""Large input must be canonical: the pure-Python strict reader only sees small frames."""
from __future__ import annotations

import cbor2
import pytest

from seed_agents.protocol.wire import dagcbor


def test_large_canonical_input_is_accepted_and_large_noncanonical_is_400():
    value = {"b": "x" * 100_000, "a": list(range(1000))}
    canonical = dagcbor.encode(value)
    assert len(canonical) > dagcbor.STRICT_MAX_SIZE
    assert dagcbor.decode(canonical) == value
    unsorted = cbor2.dumps(value)   # insertion order: "b" before "a"
    assert unsorted != canonical
    with pytest.raises(dagcbor.DagCborError) as err:
        dagcbor.decode(unsorted)
    assert err.value.status == 400 and "canonical" in err.value.message


def test_small_noncanonical_input_is_still_accepted():
    small = cbor2.dumps({"b": 1, "a": 2})
    assert dagcbor.decode(small) == {"a": 2, "b": 1}
