"""sealstore.migrations: Alembic revisions for sealstore's tables, Alembic operations for
users' columns, and online key rotation / re-indexing with status and verify.
"""
