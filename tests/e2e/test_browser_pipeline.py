"""The saga page's pipeline panel in a real browser (headless Chromium, as `test_browser.py`).

A saga's roles and model calls are written straight into its tables (known values), then
the page served by `pressroom serve` must show each role's latest run, the reviewer's
verdict and reason, and the model use. The screenshot is saved in the test's tmp_path.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLE_CORPUS, Cli, base_env
from tests.e2e.test_browser import browser  # noqa: F401  (the Chromium fixture)
from tests.support.pipelines import seed_progress
from tests.support.web import served

pytestmark = pytest.mark.e2e


def test_the_saga_page_shows_the_roles_their_verdicts_and_the_usage(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    env = base_env(
        PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", PRESSROOM_BROKER_URL="inline://"
    )
    cli = Cli(env, tmp_path)
    saga_id = cli.json(
        "submit", "--brief", "the library network", "--corpus", str(SAMPLE_CORPUS),
        "--dest", f"site:{tmp_path / 'site'}", "--as", "sam",
    )["saga_id"]  # fmt: skip
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        seed_progress(conn, saga_id)
    with served(env, tmp_path) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            page.goto(f"{url}/sagas/{saga_id}")
            panel = page.locator("#pipeline")
            assert panel.locator("h2").inner_text() == "Pipeline default"
            rows = panel.locator("tr")
            assert rows.count() == 4  # a header and one row per role, in the pipeline's order
            cells = [rows.nth(i).locator("td").all_inner_texts() for i in range(1, 4)]
            assert [c[0].splitlines()[0] for c in cells] == ["researcher", "writer", "reviewer"]
            assert [c[1] for c in cells] == ["done", "done", "failed"]
            assert cells[2][2] == "fail" and "budget exhausted" in cells[2][0]
            assert "2 model calls · 1,500 tokens in · 300 out · $0.1875" in cells[1][0]
            usage = panel.locator("#usage").inner_text()
            assert usage == "Model use: 3 model calls · 1,800 tokens in · 320 out · $0.1975"
            panel.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "saga-pipeline.png"), full_page=True)
        finally:
            page.close()
