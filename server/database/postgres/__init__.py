"""The PostgreSQL adapter of the storage port (server/database/port.py): its façade over psycopg
(`PgConn` carrying its traits), its schema gate (schema/postgres/), the rewrite of the store's
SQL and the bus of notices between servers. May import seed_agents.server.database's neutral modules and
`schema`; never seed_agents.server.store (the queries, the run leases among them, sit above).
"""
