"""Alembic migrations of Pressroom's schema (env.py, script.py.mako, versions/).

`orchestrator.store.schema` runs them; docs/deploy.md ("Migrations") says how
to add a revision.
"""
