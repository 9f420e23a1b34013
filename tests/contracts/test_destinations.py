"""The `Destination` contract, run against every adapter, then each adapter's own promises.

Every adapter is opened through the registry by URI, against the real thing:
a tmp folder (`site:`), a real git repository (`git:`), a real HTTP server on
127.0.0.1 (`webhook:`), and the in-process store (`memory:`).
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations import pinned
from sagas.destinations.base import Destination, PublishedVersion
from sagas.destinations.memory import MemoryDestination, memory_store, reset_memory_stores
from sagas.destinations.registry import open_destination
from sagas.destinations.webhook import receipt_of
from sagas.destinations.webhook_urls import WebhookAllow
from tests.support.webhook_server import WebhookServer

TIMEOUT = 10.0
LOOPBACK = WebhookAllow.parse("127.0.0.1")  # the test receivers' address, allowed as a deployment would
SHORT_TIMEOUT = 0.5


def make_version(
    title: str = "Quarterly Report", body: str = "Revenue grew.", version: int = 1
) -> PublishedVersion:
    markdown = f"# {title}\n\n{body}\n"
    return PublishedVersion(
        saga_id="saga-1",
        version=version,
        version_digest=hashlib.sha256(markdown.encode("utf-8")).hexdigest(),
        title=title,
        slug="",
        markdown=markdown,
    )


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def commit_count(repo: Path) -> int:
    if not (repo / ".git").exists():
        return 0
    done = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=repo, capture_output=True, text=True)
    return int(done.stdout) if done.returncode == 0 else 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Harness:
    """An adapter plus ways to observe its effect without asking it."""

    dest: Destination
    effects: Callable[[], int]  # grows by at least one per side effect applied
    present: Callable[[str, PublishedVersion], bool]  # is this key's version visible there?


@pytest.fixture
def webhook_server() -> Iterator[WebhookServer]:
    with WebhookServer() as server:
        yield server


@pytest.fixture(params=["memory", "site", "git", "webhook"])
def harness(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Harness]:
    kind = request.param
    if kind == "memory":
        name = f"contract-{uuid.uuid4().hex}"
        store = memory_store(name)
        yield Harness(
            open_destination(f"memory:{name}", timeout=TIMEOUT),
            lambda: store.effects,
            lambda key, version: store.pages.get(key) == version,
        )
        reset_memory_stores()
    elif kind == "site":
        folder = tmp_path / "site"
        seen: set[tuple[str, int, int]] = set()

        def site_effects() -> int:
            # Every file the adapter puts in place is a new inode (written, then renamed in).
            for path in folder.rglob("*") if folder.exists() else ():
                if path.is_file() and path.name != "lock":
                    st = path.stat()
                    seen.add((str(path), st.st_ino, st.st_mtime_ns))
            return len(seen)

        def site_present(key: str, version: PublishedVersion) -> bool:
            pages = folder.glob("quarterly-report-*.md") if folder.exists() else ()
            return any(page.read_text("utf-8") == version.markdown for page in pages)

        yield Harness(open_destination(f"site:{folder}", timeout=TIMEOUT), site_effects, site_present)
    elif kind == "git":
        repo = tmp_path / "repo"

        def git_present(key: str, version: PublishedVersion) -> bool:
            if commit_count(repo) == 0:
                return False
            shown = subprocess.run(
                ["git", "show", "HEAD:quarterly-report.md"], cwd=repo, capture_output=True, text=True
            )
            return shown.returncode == 0 and shown.stdout == version.markdown

        yield Harness(
            open_destination(f"git:{repo}", timeout=TIMEOUT), lambda: commit_count(repo), git_present
        )
    else:
        with WebhookServer() as server:
            yield Harness(
                open_destination(f"webhook:{server.url}", timeout=TIMEOUT, webhook_allow=LOOPBACK),
                lambda: server.apply_count,
                lambda key, version: server.applied.get(key, {}).get("markdown") == version.markdown,
            )


# -- the contract, for every adapter --------------------------------------------


def test_publish_returns_a_json_receipt_and_status_says_applied(harness: Harness) -> None:
    version = make_version()
    receipt = harness.dest.publish("saga-1:dest-1", version)
    assert isinstance(receipt, dict) and receipt
    assert json.loads(json.dumps(receipt)) == receipt
    assert harness.present("saga-1:dest-1", version)
    answer = harness.dest.status("saga-1:dest-1")
    assert answer.kind == "applied"
    assert answer.receipt == receipt


def test_publishing_one_key_twice_applies_once_and_returns_the_same_receipt(harness: Harness) -> None:
    version = make_version()
    before = harness.effects()
    first = harness.dest.publish("k1", version)
    after_first = harness.effects()
    second = harness.dest.publish("k1", version)
    assert after_first > before
    assert harness.effects() == after_first
    assert second == first


def test_status_of_a_key_never_published_is_absent(harness: Harness) -> None:
    assert harness.dest.status("never-published").kind == "absent"
    harness.dest.publish("k1", make_version())
    assert harness.dest.status("k2").kind == "absent"


def test_compensate_removes_the_effect(harness: Harness) -> None:
    version = make_version()
    receipt = harness.dest.publish("k1", version)
    harness.dest.compensate("k1", receipt)
    assert not harness.present("k1", version)
    assert harness.dest.status("k1").kind == "absent"


def test_compensating_twice_or_an_absent_key_is_a_no_op(harness: Harness) -> None:
    harness.dest.compensate("never-published", {})
    receipt = harness.dest.publish("k1", make_version())
    harness.dest.compensate("k1", receipt)
    effects = harness.effects()
    harness.dest.compensate("k1", receipt)
    assert harness.effects() == effects
    assert harness.dest.status("k1").kind == "absent"


def test_keys_are_independent(harness: Harness) -> None:
    one, two = make_version("First Page"), make_version("Second Page")
    receipt_one = harness.dest.publish("k1", one)
    receipt_two = harness.dest.publish("k2", two)
    assert receipt_one != receipt_two
    harness.dest.compensate("k1", receipt_one)
    assert harness.dest.status("k1").kind == "absent"
    assert harness.dest.status("k2").kind == "applied"


def test_a_compensated_key_can_be_published_again(harness: Harness) -> None:
    version = make_version()
    harness.dest.compensate("k1", harness.dest.publish("k1", version))
    harness.dest.publish("k1", version)
    assert harness.present("k1", version)
    assert harness.dest.status("k1").kind == "applied"


@pytest.mark.parametrize("key", ["", "a/b", "..", ".", "has space", "new\nline", "x" * 201])
def test_an_invalid_key_is_refused_before_any_effect(harness: Harness, key: str) -> None:
    effects = harness.effects()
    with pytest.raises(InvalidInput):
        harness.dest.publish(key, make_version())
    with pytest.raises(InvalidInput):
        harness.dest.status(key)
    with pytest.raises(InvalidInput):
        harness.dest.compensate(key, {})
    assert harness.effects() == effects


# -- site: -------------------------------------------------------------------------

SAGA_1_TAG = hashlib.sha256(b"saga-1").hexdigest()[:8]  # "saga-1" is not hex: its hash tags its page


def test_site_page_bytes_hash_to_the_version_digest(tmp_path: Path) -> None:
    version = make_version(body="Caf\u00e9 <b>bold</b> & more")
    receipt = open_destination(f"site:{tmp_path}", timeout=TIMEOUT).publish("k1", version)
    page = Path(receipt["path"])
    name = f"quarterly-report-{SAGA_1_TAG}"
    assert page == (tmp_path / f"{name}.md").resolve() and receipt["page"] == name
    assert hashlib.sha256(page.read_bytes()).hexdigest() == version.version_digest == receipt["sha256"]
    html = Path(receipt["html"]).read_text("utf-8")
    assert "<title>Quarterly Report</title>" in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>" not in html
    index = (tmp_path / "index.html").read_text("utf-8")
    assert f'<a href="{name}.html">Quarterly Report</a>' in index
    assert not list(tmp_path.rglob("*.tmp")), "no temp files left behind"


def test_site_compensation_restores_the_previous_page(tmp_path: Path) -> None:
    dest = open_destination(f"site:{tmp_path}", timeout=TIMEOUT)
    old, new = make_version(body="old text"), make_version(body="new text", version=2)
    receipt_old = dest.publish("k-old", old)
    receipt_new = dest.publish("k-new", new)
    page = Path(receipt_new["path"])
    assert page == Path(receipt_old["path"]), "a saga's next version replaces its own page"
    assert page.read_text("utf-8") == new.markdown
    dest.compensate("k-new", receipt_new)
    assert page.read_text("utf-8") == old.markdown
    assert "old text" in Path(receipt_old["html"]).read_text("utf-8")
    dest.compensate("k-old", receipt_old)
    assert not page.exists() and not Path(receipt_old["html"]).exists()
    assert "quarterly-report" not in (tmp_path / "index.html").read_text("utf-8")


def test_site_compensating_an_older_publish_keeps_the_newer_page(tmp_path: Path) -> None:
    dest = open_destination(f"site:{tmp_path}", timeout=TIMEOUT)
    old, new = make_version(body="old text"), make_version(body="new text", version=2)
    receipt_old = dest.publish("k-old", old)
    dest.publish("k-new", new)
    dest.compensate("k-old", receipt_old)
    assert Path(receipt_old["path"]).read_text("utf-8") == new.markdown
    assert dest.status("k-old").kind == "absent"
    assert dest.status("k-new").kind == "applied"


def test_site_a_failed_rename_is_undone_and_reported_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = open_destination(f"site:{tmp_path}", timeout=TIMEOUT)
    old = make_version(body="old text")
    receipt = dest.publish("k-old", old)
    real_move = pinned.Folder.move
    failed: list[str] = []

    def failing_move(self: pinned.Folder, src: str, dst: str, into: pinned.Folder | None = None) -> None:
        if dst == Path(receipt["html"]).name and self.path == str(tmp_path.resolve()) and not failed:
            failed.append(dst)  # once: the live page's .html, when its .md is in place already
            raise OSError(28, "No space left on device")
        real_move(self, src, dst, into)

    monkeypatch.setattr(pinned.Folder, "move", failing_move)
    with pytest.raises(NotApplied, match="undone"):
        dest.publish("k-new", make_version(body="new text", version=2))
    assert Path(receipt["path"]).read_text("utf-8") == old.markdown
    assert "old text" in Path(receipt["html"]).read_text("utf-8")
    assert dest.status("k-new").kind == "absent"
    assert failed and not list(tmp_path.rglob("*.tmp"))
    assert not (tmp_path / ".pressroom" / "previous" / "k-new").exists()


def test_site_a_traversing_slug_stays_inside_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    version = make_version().model_copy(update={"slug": "../../etc"})
    receipt = open_destination(f"site:{folder}", timeout=TIMEOUT).publish("k1", version)
    assert Path(receipt["path"]) == (folder / f"etc-{SAGA_1_TAG}.md").resolve()
    assert not list(tmp_path.glob("etc*")) and not (tmp_path / "etc.md").exists()


def test_site_concurrent_publishes_to_one_folder_all_reach_the_index(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    sagas = [uuid.uuid4().hex for _ in range(6)]

    def publish(n: int) -> None:
        try:
            version = make_version(f"Page {n}").model_copy(update={"saga_id": sagas[n]})
            open_destination(f"site:{tmp_path}", timeout=TIMEOUT).publish(f"k{n}", version)
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    index = (tmp_path / "index.html").read_text("utf-8")
    assert all(f'<a href="page-{n}-{sagas[n][:8]}.html">Page {n}</a>' in index for n in range(6))


def test_site_path_that_is_a_file_is_not_applied(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    with pytest.raises(NotApplied):
        open_destination(f"site:{target}", timeout=TIMEOUT).publish("k1", make_version())


# -- git: --------------------------------------------------------------------------


def trailers(repo: Path) -> list[tuple[str, str, str]]:
    """(subject, idempotency key, compensated key) per commit, newest first."""
    fmt = (
        "%s%x1f%(trailers:key=Pressroom-Idempotency-Key,valueonly)"
        "%x1f%(trailers:key=Pressroom-Compensates,valueonly)%x1e"
    )
    out = git(repo, "log", f"--format={fmt}")
    rows = []
    for record in out.split("\x1e"):
        parts = [p.strip() for p in record.strip("\n").split("\x1f")]
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def test_git_one_commit_per_key_with_trailers_and_a_revert_on_compensate(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    dest = open_destination(f"git:{repo}", timeout=TIMEOUT)
    version = make_version()
    receipt = dest.publish("k1", version)
    dest.publish("k1", version)
    assert trailers(repo) == [("Publish Quarterly Report (v1)", "k1", "")]
    assert receipt == {
        "commit": git(repo, "rev-parse", "HEAD").strip(),
        "path": "quarterly-report.md",
        "key": "k1",
    }
    message = git(repo, "log", "-1", "--format=%B")
    assert "Pressroom-Saga: saga-1" in message
    assert f"Pressroom-Version-Digest: {version.version_digest}" in message
    assert git(repo, "symbolic-ref", "--short", "HEAD").strip() == "main"

    dest.compensate("k1", receipt)
    dest.compensate("k1", receipt)
    rows = trailers(repo)
    assert rows[0] == ('Revert "Publish Quarterly Report (v1)"', "", "k1")
    assert len(rows) == 2
    assert not (repo / "quarterly-report.md").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_git_refuses_to_revert_under_a_later_publish_and_stays_clean(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    dest = open_destination(f"git:{repo}", timeout=TIMEOUT)
    receipt_old = dest.publish("k-old", make_version(body="old text"))
    dest.publish("k-new", make_version(body="new text", version=2))
    with pytest.raises(NotApplied, match="cannot revert"):
        dest.compensate("k-old", receipt_old)
    assert dest.status("k-old").kind == "applied"
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".git" / "REVERT_HEAD").exists()
    assert "new text" in (repo / "quarterly-report.md").read_text("utf-8")


def test_git_initialises_an_existing_plain_folder(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "README").write_text("kept\n")
    open_destination(f"git:{folder}", timeout=TIMEOUT).publish("k1", make_version())
    assert (folder / ".git").is_dir()
    assert git(folder, "ls-files").split() == ["quarterly-report.md"]
    assert (folder / "README").read_text() == "kept\n"


def test_git_ignores_the_callers_git_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    monkeypatch.setenv("GIT_DIR", str(decoy))
    monkeypatch.setenv("GIT_INDEX_FILE", str(decoy / "index"))
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))  # no global config to lean on
    repo = tmp_path / "repo"
    open_destination(f"git:{repo}", timeout=TIMEOUT).publish("k1", make_version())
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Pressroom <pressroom@localhost>"
    assert list(decoy.iterdir()) == []


def test_git_a_rejected_commit_is_not_applied_and_leaves_no_trace(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    dest = open_destination(f"git:{repo}", timeout=TIMEOUT)
    dest.publish("k0", make_version("Earlier Page"))
    # The branch's ref is locked (as by a concurrent git process): `git add`
    # works, `git commit` cannot move the branch. (Hooks cannot refuse it:
    # Pressroom runs git with hooks off.)
    (repo / ".git" / "refs" / "heads" / "main.lock").write_text("")
    with pytest.raises(NotApplied, match="commit of k1 failed"):
        dest.publish("k1", make_version())
    assert dest.status("k1").kind == "absent"
    assert commit_count(repo) == 1
    assert git(repo, "status", "--porcelain") == ""


def test_git_concurrent_publishes_to_one_repository_serialise(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    dest = open_destination(f"git:{repo}", timeout=TIMEOUT)
    dest.publish("k0", make_version("Page 0"))
    errors: list[BaseException] = []

    def publish(n: int) -> None:
        try:
            open_destination(f"git:{repo}", timeout=TIMEOUT).publish(f"k{n}", make_version(f"Page {n}"))
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert commit_count(repo) == 5
    assert all(dest.status(f"k{n}").kind == "applied" for n in range(5))


def test_git_path_that_is_a_file_is_not_applied(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("not a repository")
    with pytest.raises(NotApplied):
        open_destination(f"git:{target}", timeout=TIMEOUT).publish("k1", make_version())


# -- webhook: ----------------------------------------------------------------------


def test_webhook_posts_exactly_the_protocol_body_with_the_key_header(webhook_server: WebhookServer) -> None:
    version = make_version()
    receipt = open_destination(
        f"webhook:{webhook_server.url}", timeout=TIMEOUT, webhook_allow=LOOPBACK
    ).publish("k1", version)
    [request] = webhook_server.received
    assert request.method == "POST" and request.key == "k1"
    assert request.body == {
        "saga_id": "saga-1",
        "version": 1,
        "version_digest": version.version_digest,
        "title": "Quarterly Report",
        "markdown": version.markdown,
    }
    assert receipt == {
        "id": "wh-1",
        "idempotency_key": "k1",
        "version_digest": version.version_digest,
        "status_code": 200,
    }


def test_webhook_4xx_is_not_applied(webhook_server: WebhookServer) -> None:
    webhook_server.set_mode("reject")
    dest = open_destination(f"webhook:{webhook_server.url}", timeout=TIMEOUT, webhook_allow=LOOPBACK)
    with pytest.raises(NotApplied) as caught:
        dest.publish("k1", make_version())
    assert caught.value.status_code == 422  # type: ignore[attr-defined]
    assert dest.status("k1").kind == "absent"


def test_webhook_unreachable_port_is_not_applied_and_status_unknown() -> None:
    dest = open_destination(
        f"webhook:http://127.0.0.1:{free_port()}/hook", timeout=SHORT_TIMEOUT, webhook_allow=LOOPBACK
    )
    with pytest.raises(NotApplied, match="never sent"):
        dest.publish("k1", make_version())
    assert dest.status("k1").kind == "unknown"
    with pytest.raises(NotApplied):
        dest.compensate("k1", {})


def test_webhook_stall_is_maybe_applied_with_one_post_then_status_resolves(
    webhook_server: WebhookServer,
) -> None:
    webhook_server.set_mode("stall")
    dest = open_destination(f"webhook:{webhook_server.url}", timeout=SHORT_TIMEOUT, webhook_allow=LOOPBACK)
    with pytest.raises(MaybeApplied):
        dest.publish("k1", make_version())
    assert webhook_server.posts == 1
    answer = dest.status("k1")
    assert answer.kind == "applied"
    assert answer.receipt is not None and answer.receipt["idempotency_key"] == "k1"


@pytest.mark.parametrize(("mode", "status_after"), [("drop", "applied"), ("error", "absent")])
def test_webhook_no_answer_or_5xx_is_maybe_applied(
    webhook_server: WebhookServer, mode: Any, status_after: str
) -> None:
    webhook_server.set_mode(mode)
    dest = open_destination(f"webhook:{webhook_server.url}", timeout=TIMEOUT, webhook_allow=LOOPBACK)
    with pytest.raises(MaybeApplied):
        dest.publish("k1", make_version())
    assert webhook_server.posts == 1
    assert dest.status("k1").kind == status_after


def test_webhook_without_status_support_answers_unknown(webhook_server: WebhookServer) -> None:
    dest = open_destination(f"webhook:{webhook_server.url}", timeout=TIMEOUT, webhook_allow=LOOPBACK)
    dest.publish("k1", make_version())
    webhook_server.set_mode("no_status")
    answer = dest.status("k1")
    assert answer.kind == "unknown" and "501" in answer.detail


def test_webhook_receipt_is_the_json_object_or_the_text_plus_status_code() -> None:
    assert receipt_of(httpx.Response(200, json={"id": 7})) == {"id": 7, "status_code": 200}
    assert receipt_of(httpx.Response(201, text="ok")) == {"body": "ok", "status_code": 201}
    assert receipt_of(httpx.Response(200, json=[1, 2])) == {"body": [1, 2], "status_code": 200}


# -- memory: -----------------------------------------------------------------------


@pytest.fixture
def memory() -> Iterator[MemoryDestination]:
    dest = open_destination("memory:faults", timeout=TIMEOUT)
    assert isinstance(dest, MemoryDestination)
    yield dest
    reset_memory_stores()


def test_memory_opens_of_one_name_share_a_store(memory: MemoryDestination) -> None:
    receipt = memory.publish("k1", make_version())
    other = open_destination("memory:faults", timeout=TIMEOUT)
    assert other.status("k1").receipt == receipt
    assert open_destination("memory:elsewhere", timeout=TIMEOUT).status("k1").kind == "absent"
    assert memory.store.calls == {"publish": 1, "status": 1}


def test_memory_injected_faults(memory: MemoryDestination) -> None:
    store = memory.store
    store.fail_next_publish("not-applied")
    with pytest.raises(NotApplied):
        memory.publish("k1", make_version())
    assert memory.status("k1").kind == "absent"

    store.fail_next_publish("lost-before-apply")
    with pytest.raises(MaybeApplied):
        memory.publish("k1", make_version())
    assert memory.status("k1").kind == "absent"

    store.fail_next_publish("applied-then-lost")
    with pytest.raises(MaybeApplied):
        memory.publish("k1", make_version())
    assert memory.status("k1").kind == "applied"
    assert store.effects == 1

    store.status_unknown = True
    assert memory.status("k1").kind == "unknown"
    store.status_unknown = False

    store.fail_next_compensate()
    with pytest.raises(NotApplied):
        memory.compensate("k1", {})
    memory.compensate("k1", {})
    assert memory.status("k1").kind == "absent"
