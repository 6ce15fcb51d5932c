"""The SQLite adapter of the storage port (server/database/port.py): its façade (one file, a
group-committing writer thread, reader connections), its schema gate (schema/migrations/), the
connection carrying its traits, and its file lock (one server per database file). May import
seed_agents.server.database's neutral modules and `schema`; never seed_agents.server.store (the queries sit above).
"""
