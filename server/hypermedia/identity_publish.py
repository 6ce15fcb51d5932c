"""Publishing signing identities to the Seed hypermedia server (`--hm-server-url`).

The blobs are built by protocol/hm_blobs.py byte for byte as `@seed-hypermedia/client` builds
them, and sent in ONE `POST {hm}/api/PublishBlobs` (server/hypermedia/client.py), so the server holds
all of them or none: a new account is its profile, the genesis change, the change holding the
home document and the version ref; a rename or a new icon is a new profile (with the icon's
UnixFS blocks in the same call). Any failure is a 502 naming the server and never its answer;
the caller then stores nothing.
"""
from __future__ import annotations

from seed_agents.protocol import hm_blobs, unixfs
from seed_agents.protocol.errors import ProtocolError

from .client import HmClient, HmError


class Unreachable(ProtocolError):
    """The HM server did not answer at all (no connection, a timeout): not a refusal."""


async def _publish(app, blobs: list, what: str) -> None:  # noqa: ANN001
    # Over the runtime's guarded HTTP client for the HM server, as the agents' hm:// tools go:
    # reached under the providers' network policy (--provider-networks), in a pool of its own.
    client = HmClient(app.config.hm_server_url, app.runtime.hm_http,
                      timeout=app.config.hm_server_timeout)
    try:
        await client.publish_blobs(blobs)
    except HmError as exc:   # one sentence naming the server, never its answer
        kind = Unreachable if client.reachable is False else ProtocolError
        raise kind(502, f"Failed to publish {what}: {exc}") from None
    finally:
        shared = getattr(app.runtime, "hm", None)
        if shared is not None and client.reachable is not None:   # what health says
            shared.reachable, shared.unreachable_reason = client.reachable, client.unreachable_reason


async def publish_new_account(app, seed: bytes, name: str, ts_ms: int) -> None:  # noqa: ANN001
    """The new account's profile and home document."""
    await _publish(app, hm_blobs.new_account_blobs(seed, name, ts_ms), "the agent account")


async def publish_profile(app, seed: bytes, name: str, ts_ms: int, icon: bytes | None,  # noqa: ANN001
                          icon_uri: str | None, *, with_home: bool = False) -> str | None:
    """A new profile (name, and the avatar: `icon` bytes published now as UnixFS, else the
    `icon_uri` already published, else none). Returns the avatar's `ipfs://<cid>`.
    `with_home`: the whole new account (profile and home document), for an identity this server
    made while it had no HM server, published at its first update once it has one."""
    blobs: list = []
    icon_cid = icon_uri.removeprefix("ipfs://") if icon_uri else None
    if icon is not None:
        root, blobs = unixfs.file_blobs(icon)
        icon_cid = str(root)
    build = hm_blobs.new_account_blobs if with_home else hm_blobs.profile_blobs
    blobs = [*blobs, *build(seed, name, ts_ms, icon_cid)]
    await _publish(app, blobs, "the agent account" if with_home else "the agent account profile")
    return f"ipfs://{icon_cid}" if icon_cid else None
