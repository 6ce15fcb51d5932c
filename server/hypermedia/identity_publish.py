"""Publishing signing identities to the Seed hypermedia server (`--hm-server-url`).

The blobs are built by protocol/hm/hm_blobs.py byte for byte as `@seed-hypermedia/client` builds
them, and sent in ONE `POST {hm}/api/PublishBlobs` (server/hypermedia/client.py), so the server holds
all of them or none: a new account is its profile, the genesis change, the change holding the
home document and the version ref; a rename or a new icon is a new profile (with the icon's
UnixFS blocks in the same call). A refusal (the server answered 4xx, or something that is not an
answer) is a 502 naming the server and never its answer, and the caller stores nothing; a server
that does not take them (no answer, a timeout, a 5xx) is `Unreachable`, and the caller queues the
same blobs (server/hypermedia/publications.py).
"""
from __future__ import annotations

from seed_agents.protocol.hm import hm_blobs, unixfs
from seed_agents.protocol.wire.errors import ProtocolError

from .client import HmClient, HmError


class Unreachable(ProtocolError):
    """The HM server did not take the blobs (no answer, a timeout, a 5xx): not a refusal; the
    same blobs may be sent again later."""


def transient(client: HmClient, exc: HmError) -> bool:
    """Will trying again later possibly succeed? Everything but a 4xx refusal and a bad answer
    from a server that is there."""
    return client.reachable is False or (exc.status or 0) >= 500


async def publish(app, blobs: list, what: str) -> None:  # noqa: ANN001
    # Over the runtime's guarded HTTP client for the HM server, as the agents' hm:// tools go:
    # reached under the providers' network policy (--provider-networks), in a pool of its own.
    client = HmClient(app.config.hm_server_url, app.runtime.hm_http,
                      timeout=app.config.hm_server_timeout)
    try:
        await client.publish_blobs(blobs)
    except HmError as exc:   # one sentence naming the server, never its answer
        kind = Unreachable if transient(client, exc) else ProtocolError
        raise kind(502, f"Failed to publish {what}: {exc}") from None
    finally:
        shared = getattr(app.runtime, "hm", None)
        if shared is not None and client.reachable is not None:   # what health says
            shared.reachable, shared.unreachable_reason = client.reachable, client.unreachable_reason


def account_blobs(seed: bytes, name: str, ts_ms: int) -> list:
    """The new account's profile and home document."""
    return hm_blobs.new_account_blobs(seed, name, ts_ms)


def profile_blobs(seed: bytes, name: str, ts_ms: int, icon: bytes | None, icon_uri: str | None, *,
                  with_home: bool = False) -> tuple[list, str | None]:
    """A new profile (name, and the avatar: `icon` bytes as UnixFS blocks in the same call, else
    the `icon_uri` already published, else none): (the blobs, the avatar's `ipfs://<cid>`).
    `with_home`: the whole new account (profile and home document), for an identity this server
    made while it had no HM server, published at its first update once it has one."""
    blobs: list = []
    icon_cid = icon_uri.removeprefix("ipfs://") if icon_uri else None
    if icon is not None:
        root, blobs = unixfs.file_blobs(icon)
        icon_cid = str(root)
    build = hm_blobs.new_account_blobs if with_home else hm_blobs.profile_blobs
    blobs = [*blobs, *build(seed, name, ts_ms, icon_cid)]
    return blobs, f"ipfs://{icon_cid}" if icon_cid else None
