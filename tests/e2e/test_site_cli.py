"""The `site:` destination through the installed `pressroom` script.

Sagas with one brief (so one title) publish to one folder: one page each, and
a saga whose later step fails takes back only its own page. And while a
thread swaps the site folder for a link out of the allowed roots and back,
publishes driven by `pressroom approve` put no byte outside the roots.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.conftest import Cli, base_env, free_port
from tests.integration.test_site_race import files_under, swapping

BRIEF = "history of the library network"


def submit(cli: Cli, corpus: Path, *dests: str) -> str:
    args = ["submit", "--brief", BRIEF, "--corpus", str(corpus), "--as", "dana"]
    for dest in dests:
        args += ["--dest", dest]
    saga_id: str = cli.json(*args)["saga_id"]
    return saga_id


def test_sagas_with_one_title_keep_one_page_each_and_an_undo_takes_only_its_own(
    cli: Cli, corpus: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    hook = f"webhook:http://127.0.0.1:{free_port()}/hook"  # nothing listens: that step fails
    first, second = submit(cli, corpus, f"site:{site}"), submit(cli, corpus, f"site:{site}")
    undone = submit(cli, corpus, f"site:{site}", hook)
    last = submit(cli, corpus, f"site:{site}")
    for saga in (first, second):
        assert cli.json("approve", saga, "--version", "1", "--as", "erin")["state"] == "succeeded"
    failed = cli.run("approve", undone, "--version", "1", "--as", "erin", "--json")
    assert failed.returncode == 6 and "Traceback" not in failed.stderr, failed.stderr
    assert cli.json("status", undone)["state"] == "failed"
    assert cli.json("approve", last, "--version", "1", "--as", "erin")["state"] == "succeeded"

    states = {d["uri"]: d["state"] for d in cli.json("status", undone)["destinations"]}
    assert states[f"site:{site}"] == "compensated"
    pages = sorted(site.glob("*.md"))
    assert len(pages) == 3, [p.name for p in pages]
    index = (site / "index.html").read_text("utf-8")
    for saga in (first, second, last):
        status = cli.json("status", saga)
        page = Path(status["destinations"][0]["receipt"]["path"])
        assert page.parent == site.resolve() and saga[:8] in page.name
        assert hashlib.sha256(page.read_bytes()).hexdigest() == status["version_digest"]
        assert f'href="{page.with_suffix(".html").name}"' in index
    assert undone[:8] not in index and not list(site.glob(f"*{undone[:8]}*"))
    assert not list(site.rglob("*.tmp"))


def test_publishes_from_the_cli_while_the_folder_is_swapped_stay_inside_the_roots(
    tmp_path: Path, corpus: Path, sqlite_url: str
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    site = allowed / "site"
    site.mkdir(parents=True)
    (outside / "site").mkdir(parents=True)
    decoy = allowed / "site-decoy"
    decoy.symlink_to(outside / "site", target_is_directory=True)
    env = base_env(
        PRESSROOM_DATABASE_URL=sqlite_url,
        PRESSROOM_BROKER_URL="inline://",
        PRESSROOM_ALLOWED_ROOTS=f"{corpus}:{allowed}",
    )
    cli = Cli(env, tmp_path)
    sagas = [submit(cli, corpus, f"site:{site}") for _ in range(2)]
    before = files_under(outside)
    with swapping(site, decoy, pause=0.001) as swaps:  # the CLI runs for seconds: spare the CPU
        done = [cli.run("approve", saga, "--version", "1", "--as", "erin", "--json") for saga in sagas]
    assert swaps[0] > 0
    assert files_under(outside) == before, "no byte landed outside the allowed roots"
    for saga, approved in zip(sagas, done, strict=True):
        assert "Traceback" not in approved.stderr
        status = cli.json("status", saga)
        assert status["state"] in ("succeeded", "failed"), status
        receipt = status["destinations"][0]["receipt"]
        if status["state"] == "succeeded":
            assert Path(receipt["path"]).parent == site.resolve()
        else:
            assert approved.returncode == 6 and not list(site.glob(f"*{saga[:8]}*"))
