"""The Seed hypermedia codec: what `@seed-hypermedia/client` builds and reads, byte for byte.
`hm://` addresses (`hm_ids`), blobs, comments and UnixFS files, Markdown to and from document
blocks (`hm_markdown`) and the block diff, the activity feed's events, and the block tree the
desktop sends with a message (`blocks`).

May import: protocol.wire.
"""
