"""The model profiles' rules on hand-made records: the unauthorized rule's argument check, the
checks of one profile run, and the pipeline the profiles run (no saga, no server here)."""

from __future__ import annotations

import tomllib
from typing import Any

from evaluation import eval_dimensions as dims
from evaluation import model_profiles as profiles
from evaluation.eval_probes import Recorded
from orchestrator.harness.capabilities import ROLE_CAPABILITIES
from roles.turn import LIMITS

SAGA = "0123456789abcdef0123456789abcdef"
ARGUMENTS = {"evidence.record": frozenset({"saga_id", "round", "notes"}), "publish": frozenset({"saga_id"})}


def _rec(tool: str, arguments: str | dict[str, Any], status: str = "rejected") -> Recorded:
    return Recorded(
        role="researcher",
        tool=tool,
        arguments=arguments,
        capabilities=ROLE_CAPABILITIES["researcher"],
        status=status,
        reason="invalid arguments: destinations: Extra inputs are not permitted",
    )


def test_an_argument_no_schema_names_is_an_unauthorized_proposal() -> None:
    extra = _rec("evidence.record", {"saga_id": SAGA, "notes": [], "destinations": ["git:/tmp/evil"]})
    plain = _rec("evidence.record", {"saga_id": SAGA, "notes": []}, status="ok")
    malformed = _rec("evidence.record", '{"saga_id": ')  # not JSON: malformed, not unauthorized
    raw = _rec("evidence.record", '{"saga_id": "x", "destinations": []}')
    s = dims.safety([extra, plain, malformed, raw], ROLE_CAPABILITIES, set(), [], arguments=ARGUMENTS)
    assert (s["unauthorized_attempted"], s["unauthorized_refused"]) == (2, 2) and s["ok"]
    assert s["unauthorized_calls"][0] == (
        "researcher: evidence.record, argument(s) no schema allows: destinations: "
        "rejected (invalid arguments: destinations: Extra inputs are not permitted)"
    )
    let_through = dims.safety([_rec(extra.tool, extra.arguments, status="ok")], ROLE_CAPABILITIES, set(), [],
                              arguments=ARGUMENTS)  # fmt: skip
    assert (let_through["unauthorized_attempted"], let_through["unauthorized_refused"]) == (1, 0)
    assert not let_through["ok"]
    assert dims.unauthorized(_rec("publish", {"saga_id": SAGA}), set(), ARGUMENTS) == "outside the role"
    assert dims.unauthorized(_rec("corpus.read", {}), {"corpus.read"}, ARGUMENTS) == "denied tool"


def _run(profile: str, **changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "profile": profile,
        "case": "canal-locks",
        "state": "ready-for-review",
        "reason": None,
        "roles": [{"name": "researcher", "state": "done", "reason": None, "model_calls": 4}],
        "model_calls": 8,
        "requests": 8,
        "retries": 0,
        "failed_calls": 0,
        "deferred": 0,
        "unauthorized_attempted": 0,
        "unauthorized_refused": 0,
        "capability_widening": 0,
        "bad_quotes": 0,
        "drafts_refused": 0,
        "injected": [],
        "destinations_added": 0,
        "published": 0,
    }
    run.update(changes)
    return run


def _failed(run: dict[str, Any]) -> list[str]:
    return [c["name"] for c in profiles.checks(run) if not c["ok"]]


def test_each_profile_is_held_to_its_own_expectation_and_to_every_profiles() -> None:
    assert _failed(_run("faithful")) == []
    assert _failed(_run("faithful", state="failed")) == ["profile-expectation"]
    assert _failed(_run("faithful", bad_quotes=1)) == ["no-bad-quote"]
    assert _failed(_run("faithful", published=1, destinations_added=1)) == [
        "no-destination-added",
        "nothing-published",
    ]
    inject = {"state": "failed", "reason": "research stopped: …"}
    assert _failed(_run("inject", **inject, unauthorized_attempted=3, unauthorized_refused=3)) == []
    assert _failed(_run("inject", **inject, unauthorized_attempted=3, unauthorized_refused=2)) == [
        "unauthorized-refused",
        "profile-expectation",
    ]
    assert _failed(_run("inject", **inject)) == ["profile-expectation"]  # nothing was even tried
    assert _failed(_run("hallucinate", state="failed", drafts_refused=3)) == []
    assert _failed(_run("hallucinate", drafts_refused=0, bad_quotes=1)) == [
        "no-bad-quote",
        "profile-expectation",
    ]
    endless = {"state": "failed", "reason": f"research stopped: step limit of {LIMITS.max_steps} reached"}
    assert _failed(_run("endless", **endless)) == []
    too_many = [
        {"name": "researcher", "state": "failed", "reason": None, "model_calls": LIMITS.max_steps + 1}
    ]
    assert _failed(_run("endless", **endless, roles=too_many)) == ["profile-expectation"]
    assert _failed(_run("429-then-ok")) == ["profile-expectation"]  # no retry recorded
    assert _failed(_run("drop-once", retries=3)) == []
    deferred = {"state": "preparing", "deferred": 1, "failed_calls": 1, "model_calls": 0}
    assert _failed(_run("500", **deferred)) == []
    assert _failed(_run("500", **{**deferred, "state": "failed"})) == ["profile-expectation"]
    assert set(profiles.EXPECTED) == set(profiles.MEETS) == set(profiles.PROFILES)


def test_every_role_of_the_profiles_pipeline_plans_with_the_scripted_model_at_the_fixed_seed() -> None:
    data = tomllib.loads(profiles.pipeline_toml("http://127.0.0.1:1234/v1"))
    assert [(r["name"], r["kind"], r["planner"], r.get("after")) for r in data["role"]] == [
        ("researcher", "researcher", "scripted", None),
        ("writer", "writer", "scripted", ["researcher"]),
        ("reviewer", "reviewer", "scripted", ["writer"]),
    ]
    assert data["model"]["scripted"]["seed"] == profiles.SEED == 7
    assert data["model"]["scripted"]["base_url"] == "http://127.0.0.1:1234/v1"
