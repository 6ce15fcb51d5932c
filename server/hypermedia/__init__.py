"""The Seed hypermedia network seen from the server: the HTTP half of the Seed client
(`client.py`: read and publish documents on a Seed HM server; the blobs themselves are
protocol/hm_blobs.py) and the publishing of signing identities (`identity_publish.py`).

May import: protocol, server.providers (the outbound network policy).
"""
