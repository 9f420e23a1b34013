"""Saga page render time: the reviewer's workspace with 50 versions and 200 citations.

    .venv/bin/python bench/page_render.py [--rounds 20]

One saga is submitted on a throwaway SQLite database (in-process broker, the
sample corpus, a `memory:` destination), so its events, outbox rows and
approval wait are real. Then 49 more versions are written straight into the
versions table; the head carries 200 citations, each quoting a real sentence
of the sample corpus (so every quote is found in its source and shown with
its surrounding lines) and its review carries findings on sentences. Timed,
in one process, round after round:

- `load`: `workspace.load_workspace` (status, show, history, the versions
  list, re-reading the cited sources, the document body, the timeline);
- `template`: `pages.saga_page` over what `load` returned;
- `GET /sagas/{id}`: the whole request through the ASGI app (Starlette's test
  client: routing, the visitor, both steps above, the headers).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, Stats, command_line, fmt_ms, git_rev, stamp, table, write_section  # noqa: E402

TITLE = "Saga page render time"
VERSIONS = 50
CITATIONS = 200


def _sentences(corpus: Path) -> list[tuple[str, str, str]]:
    """(source path, digest, sentence) for every sentence of the sample corpus."""
    from roles.corpus import sentence_spans

    found = []
    for path in sorted(corpus.rglob("*.md")) + sorted(corpus.rglob("*.txt")):
        text = path.read_text(encoding="utf-8")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        for start, end in sentence_spans(text):
            sentence = text[start:end]
            if "\n" not in sentence and not sentence.startswith("#") and len(sentence.split()) >= 5:
                found.append((path.relative_to(corpus).as_posix(), digest, sentence))
    return found


def _head(corpus: Path) -> tuple[str, list[dict[str, str]], dict[str, object]]:
    sentences = _sentences(corpus)
    citations = []
    paragraphs = []
    for i in range(CITATIONS):
        source, digest, sentence = sentences[i % len(sentences)]
        citations.append(
            {"marker": f"[{i + 1}]", "source": source, "quote": sentence, "source_digest": digest}
        )
    for start in range(0, CITATIONS, 4):
        paragraphs.append(" ".join(f"{c['quote']} {c['marker']}" for c in citations[start : start + 4]))
    sources = "\n".join(f"- {c['marker']} {c['source']}" for c in citations)
    markdown = "# A long version\n\n" + "\n\n".join(paragraphs) + "\n\n## Sources\n\n" + sources + "\n"
    findings = [
        {
            "rule": "unsupported-sentence",
            "location": f"paragraph {n} sentence 2",
            "message": "m",
            "severity": "error",
        }
        for n in range(1, 40, 3)
    ]
    review = {"verdict": "changes_requested", "findings": findings, "checked_citations": CITATIONS}
    return markdown, citations, review


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    opts = parser.parse_args()

    from sqlmodel import Session
    from starlette.testclient import TestClient

    from orchestrator.bootstrap import build_app
    from orchestrator.core.config import Settings
    from orchestrator.entrypoints.http import create_app
    from orchestrator.entrypoints.web import pages, workspace
    from orchestrator.store.tables import SagaRow
    from sagas import records

    corpus = ROOT / "roles" / "sample_corpus"
    with tempfile.TemporaryDirectory(prefix="pr-page-render-") as tmp:
        settings = Settings(database_url=f"sqlite:///{tmp}/bench.db", broker_url="inline://", secret="bench")
        app = build_app(settings, memory_destinations=True)
        saga_id = app.submissions.submit(
            brief="the library network", corpus=str(corpus), destinations=["memory:bench"], actor="bench"
        )["saga_id"]
        markdown, citations, review = _head(corpus)
        with Session(app.engine) as s:
            saga = s.get(SagaRow, saga_id)
            assert saga is not None
            for n in range(2, VERSIONS + 1):
                body = markdown if n == VERSIONS else markdown.replace("A long version", f"Draft {n}")
                records.add_version(
                    s,
                    saga,
                    title=f"Draft {n}",
                    markdown=body,
                    author=f"person{n % 3}",
                    citations=citations,
                    evidence_digest=None,
                )
                s.flush()
                head = records.version(s, saga_id, n)
                head.review = review
                s.add(head)
            s.commit()
            assert s.get(SagaRow, saga_id).head_version == VERSIONS  # type: ignore[union-attr]
            assert len(records.version(s, saga_id, VERSIONS).citations) == CITATIONS

        samples: dict[str, list[float]] = {"load": [], "template": [], "GET /sagas/{id}": []}
        sizes = set()
        started = stamp()
        with TestClient(create_app(app)) as client:
            for _ in range(opts.rounds):
                t0 = time.perf_counter()
                data = workspace.load_workspace(app, saga_id)
                t1 = time.perf_counter()
                page = pages.saga_page(
                    data["status"],
                    data["version"],
                    data["history"],
                    token="t",
                    viewer=pages.OPEN_VIEWER,
                    workspace=data["workspace"],
                    nonce="n",
                )
                t2 = time.perf_counter()
                answer = client.get(f"/sagas/{saga_id}")
                t3 = time.perf_counter()
                assert answer.status_code == 200 and page.count('class="cite') >= CITATIONS
                samples["load"].append(t1 - t0)
                samples["template"].append(t2 - t1)
                samples["GET /sagas/{id}"].append(t3 - t2)
                sizes.add(len(answer.content))
    rows = [
        [name, fmt_ms(Stats(name, v).median), fmt_ms(Stats(name, v).p99), len(v)]
        for name, v in samples.items()
    ]
    body = "\n\n".join(
        [
            f"Written by `bench/page_render.py`, {started}, code at {git_rev()}. Command: `{command_line()}`.",
            f"One saga on SQLite with {VERSIONS} versions; the head has {CITATIONS} citations (each quote "
            "re-read from its source and shown with its surrounding lines) and findings on 13 sentences. "
            "`load` reads everything the page shows, `template` renders it, `GET` is the whole request "
            f"through the ASGI app. Page size {max(sizes) // 1024} KiB. Load average of the shared "
            f"machine at the end of the run: {os.getloadavg()[0]:.1f} (2 cores).",
            table(["step", "median ms", "p99 ms", "n"], rows),
        ]
    )
    print(body)
    if not opts.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()
