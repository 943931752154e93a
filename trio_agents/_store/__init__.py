"""Sessions and where they are kept: the record format and its shape checks, the store
protocol and the in-memory store, SQLite (written behind by one thread, committed in
groups) and PostgreSQL (shared by hosts, with claims), and the errors a store file can give.
"""
