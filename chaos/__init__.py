"""The chaos suite (`make chaos`): Pressroom's relay and workers as processes on a
PostgreSQL and a Redis of the suite's own, N sagas driven through the CLI, a
seeded nemesis, and a checker of lost, stuck, duplicate and unauthorized effects.

Not part of `make test` and not shipped in the wheel. `python -m chaos --help`.
"""
