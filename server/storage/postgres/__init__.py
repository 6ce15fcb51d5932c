"""The PostgreSQL adapter of the storage port (server/storage/port.py): its façade over psycopg,
its schema gate (schema/postgres/), the rewrite of the store's SQL, the bus of notices between
servers and the run leases. May import server.storage's neutral modules, server.store and
`schema`; nothing above the store.
"""
