"""`pressroom history SAGA_ID` as text, through the console script: each action's phase times.

Piped, every event is one line (ids and keys whole, a person's reason folded onto it,
escape sequences dropped) ending with the action's phases: the proposal's clock time,
then each next phase's time after the one before, as the `--json` timestamps say. On a
terminal (a pseudo-terminal here) the same phases stand on an indented line below the
action's row.
"""

from __future__ import annotations

import os
import pty
import subprocess
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import PRESSROOM, SAMPLE_CORPUS, Cli, base_env

REASON = "needs the bookmobile years\nand the 1990s\x1b]0;owned\x07 branches"


def _ms(a: str, b: str) -> str:
    """The time from phase `a` to phase `b` as the text shows it."""
    ms = (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds() * 1000
    return f"+{ms:.1f}ms" if abs(ms) < 1000 else f"+{ms / 1000:.2f}s"


def _expected_phases(event: dict[str, Any]) -> str:
    proposed = datetime.fromisoformat(event["proposed_at"]).strftime("%H:%M:%S.%f")[:12]
    return (
        f"proposed {proposed}, "
        f"authorized {_ms(event['proposed_at'], event['authorized_at'])}, "
        f"sent {_ms(event['authorized_at'], event['sent_at'])}, "
        f"acked {_ms(event['sent_at'], event['acked_at'])}"
    )


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """One database for the module's tests (they only read it)."""
    home = tmp_path_factory.mktemp("history")
    env = base_env(PRESSROOM_DATABASE_URL=f"sqlite:///{home / 'p.db'}", PRESSROOM_BROKER_URL="inline://")
    return Cli(env, home)


@pytest.fixture(scope="module")
def published(cli: Cli) -> str:
    """A saga rejected once (with a two-line reason), then approved and published."""
    sid: str = cli.json(
        "submit", "--brief", "history of the library network", "--corpus", str(SAMPLE_CORPUS),
        "--dest", f"site:{cli.cwd / 'site'}", "--as", "dana",
    )["saga_id"]  # fmt: skip
    rejected = cli.run("reject", sid, "--as", "erin", "--reason", REASON)
    assert rejected.returncode == 0, rejected.stderr
    head = cli.json("status", sid)
    assert head["state"] == "ready-for-review"
    cli.json("approve", sid, "--version", str(head["version"]), "--as", "erin")
    assert cli.json("status", sid)["state"] == "succeeded"
    return sid


def test_piped_history_is_one_line_per_event_with_phase_times(cli: Cli, published: str) -> None:
    events = cli.json("history", published)["events"]
    done = cli.run("history", published)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(events)  # one record per line, the reason's newline folded
    publish = [(i, e) for i, e in enumerate(events) if e["tool"] == "publish" and e["kind"] == "tool_call"]
    assert len(publish) == 1
    i, event = publish[0]
    assert all(event[k] for k in ("proposed_at", "authorized_at", "sent_at", "acked_at"))
    assert lines[i].endswith("  " + _expected_phases(event)), lines[i]
    key = cli.json("status", published)["destinations"][0]["idempotency_key"]
    assert key in lines[i].split("  ")  # the key whole, as one cell
    with_phases = [e for e in events if e["proposed_at"]]
    assert len(with_phases) >= 5  # every tool call, read-only ones too
    for line, e in zip(lines, events, strict=True):
        assert (" proposed " in line) == bool(e["proposed_at"]), line
    reasons = [line for line in lines if "needs the bookmobile years" in line]
    assert len(reasons) == 1
    assert "years and the 1990s]0;owned branches" in reasons[0]  # folded; ESC and BEL dropped
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout


def test_terminal_history_shows_the_phases_below_each_action(cli: Cli, published: str) -> None:
    events = cli.json("history", published)["events"]
    publish = next(e for e in events if e["tool"] == "publish" and e["kind"] == "tool_call")
    leader, follower = pty.openpty()
    env = {**cli.env, "COLUMNS": "80", "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [PRESSROOM, "history", published], env=env, cwd=cli.cwd, stdout=follower, stderr=subprocess.PIPE
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    text = b"".join(chunks).decode()
    assert "\x1b]" not in text and "\x07" not in text  # the reason's escape sequence never reaches it
    plain = [_strip_styles(line).rstrip() for line in text.splitlines()]
    rows = [n for n, line in enumerate(plain) if " tool_call " in line and " publish " in line]
    assert len(rows) == 1, plain
    below = plain[rows[0] + 1]
    assert below.startswith(" " * 14) and below.strip() == _expected_phases(publish), below


def _strip_styles(line: str) -> str:
    """The text of a terminal line without rich's SGR codes (ESC [ … m) and carriage returns."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "\x1b" and line[i + 1 : i + 2] == "[":
            j = i + 2
            while j < len(line) and not line[j].isalpha():
                j += 1
            i = j + 1
            continue
        if line[i] != "\r":
            out.append(line[i])
        i += 1
    return "".join(out)
