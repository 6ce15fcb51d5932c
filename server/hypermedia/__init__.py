"""The Seed hypermedia network seen from the server: the HTTP half of the Seed client
(`client.py`: read and publish documents on a Seed HM server; the blobs themselves are
protocol/hm/hm_blobs.py), the publishing of signing identities (`identity_publish.py`), and the
publication queue that sends again what the HM server did not take (`publications.py`).

May import: protocol, server.providers (the outbound network policy), server.store,
server.database (the publication queue's rows).
"""
