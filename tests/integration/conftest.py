"""Integration tests end by auditing every saga they touched (`tests/support/record_check.py`):
its events chain, reduce to its stored state, and its checkpoints chain.

A test that edits a saga's rows behind its events on purpose (to show what
the harness does with a corrupted record) is marked `record_edited`: for it
the audit must find the edit instead.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.support import record_check


@pytest.fixture(params=["sqlite", "postgresql"])
def either_db_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """A database URL, once for a SQLite file and once for a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return sqlite_url
    url: str = request.getfixturevalue("pg_url")
    return url


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "record_edited: the test edits saga rows behind the events on purpose")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    record_check.watch()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    outcome = yield
    # Before teardown: the test's databases still exist.
    problems = record_check.check()
    if item.get_closest_marker("record_edited") is not None:
        if not problems:
            pytest.fail(
                "the test edits a saga behind its events, and the audit did not notice", pytrace=False
            )
    elif problems:
        pytest.fail(
            "the stored state does not follow from the events:\n" + "\n".join(problems), pytrace=False
        )
    return outcome
