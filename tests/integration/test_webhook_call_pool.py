"""A saga with the most destinations allowed publishes on a bounded pool of threads.

Reported: a 400-destination publish started 402 threads and exhausted the
database pool. Now a saga holds at most PRESSROOM_MAX_DESTINATIONS, and its
calls queue on the process's one pool of call threads (`SagaRunner.call_threads`,
half the database pool), however many destinations it has.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tests.integration.helpers import make_app, ready_saga
from tests.support.webhook_server import ReferenceReceiver

PROCESSING = 0.3  # each POST, so that calls overlap when they can


def test_the_maximum_destinations_publish_with_a_bounded_number_of_threads(
    sqlite_url: str, tmp_path: Path, corpus: Path
) -> None:
    app = make_app(sqlite_url, tmp_path, destination_timeout=10.0, db_pool_size=8)
    bound = app.runner.call_threads
    assert bound == 4, "half the database pool"
    most = app.settings.max_destinations
    assert most == 20
    threads_seen: list[int] = []
    stop = threading.Event()
    # Pools of apps that earlier tests in this process built may still hold their threads.
    before = {t.ident for t in threading.enumerate()}

    def count_threads() -> None:
        while not stop.is_set():
            threads_seen.append(
                sum(t.name.startswith("publish") and t.ident not in before for t in threading.enumerate())
            )
            stop.wait(0.01)

    with ReferenceReceiver(tmp_path, delay=PROCESSING) as receiver:
        dests = [f"webhook:{receiver.url(f'/hook/{n}')}" for n in range(most)]
        saga = ready_saga(app, corpus, dests)
        sampler = threading.Thread(target=count_threads, name="sampler")
        sampler.start()
        try:
            app.reviews.approve(saga["saga_id"], version=saga["version"], actor="erin")
        finally:
            stop.set()
            sampler.join()
        status = app.reads.status(saga["saga_id"])
        assert status["state"] == "succeeded", status
        assert len(receiver.keys("applied")) == most
        assert 2 <= receiver.most_in_flight() <= bound, "concurrent, and never more calls than the pool"
    assert max(threads_seen) <= bound, f"at most {bound} call threads, saw {max(threads_seen)}"
    app.close()
