"""A file as UnixFS blocks, as `@seed-hypermedia/client`'s `fileToIpfsBlobs` makes them.

That is `ipfs-unixfs-importer` (15.x) with its defaults: fixed 262 144-byte chunks stored as raw
leaves (CIDv1, codec raw 0x55, sha2-256); one chunk alone is the file (its CID is the raw
leaf's); more chunks hang under dag-pb nodes (codec 0x70) of at most 174 links each, balanced,
whose UnixFS data says `File`, the file size and each child's size. Blocks are listed in the
order the importer stores them (leaves as they are cut, a repeated chunk once, then the nodes
above them), as the library returns them.

One difference, on purpose: the library lists every block under a raw-codec CID (its memory
blockstore forgets the codec); here each block carries its true CID, so the dag-pb root is listed
as the `bafybei…` that the avatar URL names. The multihash, hence the bytes, is the same.
Proven against the library: tests/hm_vectors/accounts.json ("unixfs"), tests/protocol/test_unixfs.py.
"""

from __future__ import annotations

from multiformats import varint

from .hm_blobs import Blob, blob_cid

__all__ = ["CHUNK_SIZE", "MAX_LINKS", "RAW", "DAG_PB", "file_blobs"]

CHUNK_SIZE = 262_144
MAX_LINKS = 174  # ipfs-unixfs-importer's balanced layout default (maxChildrenPerNode)
RAW = 0x55
DAG_PB = 0x70


def _field(number: int, wire_type: int) -> bytes:
    return varint.encode(number << 3 | wire_type)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _field(number, 2) + varint.encode(len(value)) + value


def _uint_field(number: int, value: int) -> bytes:
    return _field(number, 0) + varint.encode(value)


def _cid_bytes(cid: str) -> bytes:
    from multiformats import CID
    return bytes(CID.decode(cid))


class _Child:
    __slots__ = ("cid", "file_size", "tsize")

    def __init__(self, cid: str, file_size: int, tsize: int) -> None:
        self.cid = cid
        self.file_size = file_size  # bytes of file content under it
        self.tsize = tsize  # bytes of all blocks under it, itself included


def _file_node(children: list[_Child]) -> bytes:
    """A dag-pb node (links first, then Data, as dag-pb's canonical form) of a UnixFS File."""
    out = bytearray()
    for child in children:
        link = _bytes_field(1, _cid_bytes(child.cid)) + _bytes_field(2, b"") + _uint_field(3, child.tsize)
        out += _bytes_field(2, link)
    data = _uint_field(1, 2) + _uint_field(3, sum(c.file_size for c in children))
    for child in children:
        data += _uint_field(4, child.file_size)
    out += _bytes_field(1, data)
    return bytes(out)


def file_blobs(data: bytes) -> tuple[str, list[Blob]]:
    """(root CID, blocks) of `data` as UnixFS: what an icon or an IPFS upload publishes."""
    blobs: list[Blob] = []
    seen: set[str] = set()

    def store(cid: str, block: bytes) -> None:
        if cid not in seen:
            seen.add(cid)
            blobs.append(Blob(cid, block))

    level: list[_Child] = []
    for start in range(0, max(len(data), 1), CHUNK_SIZE):
        chunk = data[start:start + CHUNK_SIZE]
        cid = blob_cid(chunk, RAW)
        store(cid, chunk)
        level.append(_Child(cid, len(chunk), len(chunk)))
    if len(level) == 1:
        return level[0].cid, blobs
    while len(level) > 1:
        parents = []
        for start in range(0, len(level), MAX_LINKS):
            group = level[start:start + MAX_LINKS]
            node = _file_node(group)
            cid = blob_cid(node, DAG_PB)
            store(cid, node)
            parents.append(_Child(cid, sum(c.file_size for c in group), len(node) + sum(c.tsize for c in group)))
        level = parents
    return level[0].cid, blobs
