"""`approve` tells an approval whose publish failed apart from a refused approval.

Through the console script: an approval that was made and used, whose publish
then failed definitely (the webhook receiver answers 422), exits 6 with one
line saying it was approved and how the publish ended; `--json` still prints
the one object (the approval's fields and the outcome). A real refusal (a
stale version, an approval already used) still exits 4. Other commands that
drove work inline which ended badly exit 6 too, with `saga ID is STATE`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli, base_env
from tests.support.webhook_server import WebhookServer

EXIT_REFUSED = 4
EXIT_WORK_ENDED = 6


def make_cli(tmp_path: Path) -> Cli:
    return Cli(
        base_env(
            PRESSROOM_DATABASE_URL=f"sqlite:///{tmp_path / 'pressroom.db'}",
            PRESSROOM_BROKER_URL="inline://",
            PRESSROOM_WEBHOOK_ALLOW="127.0.0.1",  # the receivers listen on loopback
        ),
        tmp_path,
    )


def submit(cli: Cli, corpus: Path, dest: str) -> str:
    out = cli.json(
        "submit", "--brief", "history of the library network", "--corpus", str(corpus), "--dest", dest,
        "--as", "dana",
    )  # fmt: skip
    assert out["state"] == "ready-for-review", out
    return str(out["saga_id"])


def test_an_approval_whose_publish_failed_exits_6_and_says_it_was_approved(
    tmp_path: Path, corpus: Path
) -> None:
    cli = make_cli(tmp_path)
    with WebhookServer("reject") as hook:
        dest = f"webhook:{hook.url}"
        sid = submit(cli, corpus, dest)
        done = cli.run("approve", sid, "--version", "1", "--as", "erin", "--json")
        human = cli.run("approve", sid, "--version", "1", "--as", "erin")
    assert done.returncode == EXIT_WORK_ENDED, done.stderr
    printed = json.loads(done.stdout)
    assert done.stdout.count("\n") == 1, "one object on one line"
    assert {"approval_id", "version", "version_digest", "expires_at"} <= set(printed)
    assert printed["version"] == 1 and printed["state"] == "failed"
    assert printed["reason"].startswith(f"{dest}: ") and "422" in printed["reason"]
    [line] = done.stderr.splitlines()
    assert line == f"error: approved; the publish it started ended failed: {printed['reason']}"
    status = cli.json("status", sid)
    assert status["approval"]["consumed_at"] is not None, "the approval was made and used"
    # Approving the same version again: the saga has moved on, that is a refusal.
    assert human.returncode == EXIT_REFUSED, human.stderr
    assert "approved; the publish" not in human.stderr


def test_a_stale_version_is_still_refused_with_4(tmp_path: Path, corpus: Path) -> None:
    cli = make_cli(tmp_path)
    with WebhookServer() as hook:
        sid = submit(cli, corpus, f"webhook:{hook.url}")
        edited = tmp_path / "v2.md"
        edited.write_text(cli.json("show", sid)["markdown"] + "\nOne more line.\n", encoding="utf-8")
        assert cli.run("edit", sid, "--file", str(edited), "--as", "dana").returncode == 0
        stale = cli.run("approve", sid, "--version", "1", "--as", "erin", "--json")
        assert hook.apply_count == 0, "nothing was published"
    assert stale.returncode == EXIT_REFUSED, stale.stderr
    assert stale.stdout == ""
    [line] = stale.stderr.splitlines()
    assert line.startswith("error: ") and "approved;" not in line


def test_a_retry_that_fails_again_exits_6_with_the_sagas_state(tmp_path: Path, corpus: Path) -> None:
    cli = make_cli(tmp_path)
    with WebhookServer("reject") as hook:
        dest = f"webhook:{hook.url}"
        sid = submit(cli, corpus, dest)
        assert cli.run("approve", sid, "--version", "1", "--as", "erin").returncode == EXIT_WORK_ENDED
        again = cli.run("retry", sid, "--as", "olga")
    assert again.returncode == EXIT_WORK_ENDED, again.stderr
    [line] = again.stderr.splitlines()
    assert line.startswith(f"error: saga {sid} is failed: {dest}: ")
