"""Everything a client signs and the server checks: pure code, no sockets, no disk, no clock.

Four sub-packages, each importing only those below it (tests/repo/test_import_structure.py):

- `wire/`: encoding (strict DAG-CBOR), principals and keys, the signed envelope, capabilities,
  CIDs and CAR, events, the framings and the HTTP reader.
- `hm/`: the Seed hypermedia codec (hm:// ids, blobs, comments, Markdown, UnixFS, blocks).
- `agent/`: the agent model (tool registry and documents, lambda ABI, preamble, plans,
  providers, reasoning levels, owner-only fields).
- `api/`: the typed actions (`parse_action`), their fields, and verifiable history.

See docs/architecture.md.
"""
