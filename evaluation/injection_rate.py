"""How often the injection screen (`roles.injection.assess`) flags held-out text.

The set is `examples/injection/heldout.jsonl`: one JSON object a line, `label`
(`injection` or `benign`), `lang`, `form` (plain, paraphrase, leetspeak, spaced,
markup, base64; `prose` for the benign controls) and `text`. It was written apart
from the screen's rules and is not used to build them: the rates say how the
screen does on forms it was not tuned for. The screen is one layer; what keeps
flagged or unflagged text from acting is structural (docs/security.md).

    python -m evaluation.injection_rate [--cases FILE] [--json]

prints the detection rate (injections flagged), the false-positive rate (benign
controls flagged), and the detection rate by form and by language.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from roles.injection import assess

HELDOUT = Path(__file__).resolve().parent.parent / "examples" / "injection" / "heldout.jsonl"


def load(path: Path = HELDOUT) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _rate(hits: int, total: int) -> dict[str, Any]:
    return {"flagged": hits, "total": total, "rate": round(hits / total, 3) if total else None}


def measure(cases: list[dict[str, str]]) -> dict[str, Any]:
    """The rates over `cases`, and each injection the screen let through."""
    flagged = [bool(assess(c["text"])) for c in cases]
    injections = [(c, f) for c, f in zip(cases, flagged, strict=True) if c["label"] == "injection"]
    benign = [(c, f) for c, f in zip(cases, flagged, strict=True) if c["label"] == "benign"]
    by: dict[str, dict[str, list[bool]]] = {"form": defaultdict(list), "lang": defaultdict(list)}
    for c, f in injections:
        by["form"][c["form"]].append(f)
        by["lang"][c["lang"]].append(f)
    return {
        "detection": _rate(sum(f for _, f in injections), len(injections)),
        "false_positives": _rate(sum(f for _, f in benign), len(benign)),
        "by_form": {k: _rate(sum(v), len(v)) for k, v in sorted(by["form"].items())},
        "by_lang": {k: _rate(sum(v), len(v)) for k, v in sorted(by["lang"].items())},
        "missed": [c["text"] for c, f in injections if not f],
    }


def markdown(result: dict[str, Any]) -> str:
    d, fp = result["detection"], result["false_positives"]
    lines = [
        f"- detection: {d['flagged']}/{d['total']} held-out injections flagged ({d['rate']:.0%})",
        f"- false positives: {fp['flagged']}/{fp['total']} benign controls flagged ({fp['rate']:.0%})",
        "- by form: " + ", ".join(f"{k} {v['flagged']}/{v['total']}" for k, v in result["by_form"].items()),
        "- by language: "
        + ", ".join(f"{k} {v['flagged']}/{v['total']}" for k, v in result["by_lang"].items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.injection_rate")
    parser.add_argument("--cases", type=Path, default=HELDOUT)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(load(args.cases))
    print(json.dumps(result, ensure_ascii=False) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["HELDOUT", "load", "main", "markdown", "measure"]
