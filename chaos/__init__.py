"""The chaos suite (`make chaos`): Pressroom's relay, workers and API as processes on a
PostgreSQL and a Redis of the suite's own, N sagas to four destinations driven through the HTTP
API, a seeded nemesis, an operator who reconciles and retries through the CLI, and a checker of
lost, stuck, duplicate and unauthorized effects against each destination's own record.

Not part of `make test` and not shipped in the wheel. `python -m chaos --help`.
"""
