"""The wire: how an action travels and is signed (CONTRACT sections 2, 3, 5-7). Strict DAG-CBOR
(`dagcbor`), principals and keys, the signed envelope and capability blobs, CIDs and CAR
archives, the event and error maps, the three framings (HTTP, v1 and v2 WebSocket) with their
frame limits, the HTTP reader, the WebSocket frame writer, and the contract's rules for files.
`errors` holds the ProtocolError every layer answers with.

May import: nothing else in protocol/ (the bottom layer).
"""
