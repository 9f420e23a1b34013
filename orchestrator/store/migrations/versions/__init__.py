"""Alembic revisions, oldest first: `0001_baseline` is the schema of the last
release made with `create_all`."""
