"""How the scripted model reads one chat-completions request (no I/O here).

A request is read the way the model-role contract writes it (`roles.model_goals`,
`roles.model_turn`): the first `user` message holds the goal as one JSON
object (`role`, `role_name`, `saga_id`, `brief`, and the role's own fields),
then each earlier step is an `assistant` message with one tool call and the
`tool` message answering it (a JSON object with `status` and `content`).
`read_conversation()` turns a request body into a `Conversation`; a script
answers it with a `Reply` (a text, or one tool `Call`).

Tool answers are read as the planner frames them: the tool's output under
`content`, or, when the planner cut a long one, `{"truncated_from_chars",
"start"}` where `start` is the output's JSON cut short; `field()` recovers a
string field from either, and says whether it is whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# The tool whose answer is each role's result, as the API spells tool names.
RESULT_TOOLS: Final = {"researcher": "evidence_record", "writer": "draft_write", "reviewer": "review_record"}
_OK: Final = frozenset({"ok", "replayed"})


@dataclass(frozen=True)
class Step:
    """One earlier tool call (raw and parsed arguments) and the status and content of its answer."""

    name: str
    arguments: str
    args: dict[str, Any] | None
    status: str | None
    content: Any

    @property
    def ok(self) -> bool:
        return self.status in _OK

    def arg(self, key: str) -> Any:
        return (self.args or {}).get(key)


@dataclass(frozen=True)
class Conversation:
    """What one request says: the goal, the role kind, the steps so far, the tools offered
    (name -> JSON Schema of its arguments), the seed, and the server's count for it."""

    goal: dict[str, Any]
    role: str
    steps: tuple[Step, ...]
    tools: dict[str, dict[str, Any]]
    seed: int = 0
    attempt: int = 0

    @property
    def saga_id(self) -> str:
        return str(self.goal.get("saga_id") or "")

    @property
    def brief(self) -> str:
        return str(self.goal.get("brief") or "")

    @property
    def key(self) -> str:
        """The conversation's identity across its requests: the saga and the pipeline's role name."""
        return json.dumps([self.saga_id, str(self.goal.get("role_name") or self.role)])

    def calls(self, name: str) -> list[Step]:
        return [step for step in self.steps if step.name == name]


@dataclass(frozen=True)
class Call:
    """One tool call: the API's name for the tool and the raw argument string."""

    name: str
    arguments: str

    @classmethod
    def of(cls, name: str, **arguments: Any) -> Call:
        return cls(name=name, arguments=json.dumps(arguments, ensure_ascii=False))


@dataclass(frozen=True)
class Reply:
    """An assistant message: a text, or one tool call."""

    text: str | None = None
    call: Call | None = None


def done(text: str) -> Reply:
    """An answer without a tool call: the model's turn is over."""
    return Reply(text=text)


def read_conversation(body: Mapping[str, Any], attempt: int = 0) -> Conversation:
    """The goal, the earlier steps, the tools offered and the seed of one request body."""
    messages = [m for m in body.get("messages") or () if isinstance(m, Mapping)]
    goal = _goal(messages)
    tools: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or ():
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            tools[function["name"]] = dict(parameters) if isinstance(parameters, Mapping) else {}
    seed = body.get("seed")
    return Conversation(
        goal=goal,
        role=_role(goal, tools),
        steps=_steps(messages),
        tools=tools,
        seed=seed if isinstance(seed, int) else 0,
        attempt=attempt,
    )


def _goal(messages: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The first user message's JSON object (text the planner appends after it is ignored)."""
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            try:
                goal, _ = json.JSONDecoder().raw_decode(message["content"].lstrip())
            except ValueError:
                return {}
            return goal if isinstance(goal, dict) else {}
    return {}


def _role(goal: Mapping[str, Any], tools: Mapping[str, Any]) -> str:
    """The goal's role kind; without one, the kind the offered result tool belongs to."""
    if isinstance(goal.get("role"), str) and goal["role"]:
        return str(goal["role"])
    for role, tool in RESULT_TOOLS.items():
        if tool in tools:
            return role
    return "researcher" if "corpus_search" in tools else "unknown"


def _steps(messages: list[Mapping[str, Any]]) -> tuple[Step, ...]:
    """Each earlier tool call with the answer its `tool` message holds (if any came)."""
    answers: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            answers[message["tool_call_id"]] = message.get("content")
    steps: list[Step] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            raw = function.get("arguments")
            raw = raw if isinstance(raw, str) else ""
            status, content = _answer(answers.get(call.get("id")))
            steps.append(
                Step(
                    name=str(function.get("name", "")),
                    arguments=raw,
                    args=_object(raw),
                    status=status,
                    content=content,
                )
            )
    return tuple(steps)


def _answer(text: Any) -> tuple[str | None, Any]:
    """(status, content) of a tool message's JSON; (None, the raw text) when it is not JSON."""
    data = _object(text) if isinstance(text, str) else None
    if data is None:
        return None, text
    status = data.get("status")
    return (status if isinstance(status, str) else None), data.get("content")


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def field(content: Any, name: str) -> tuple[str | None, bool]:
    """A string field of a tool's output and whether it is whole; from a cut output, as much
    of it as the cut kept (`False`) or all of it when its closing quote survived (`True`)."""
    if isinstance(content, Mapping) and isinstance(content.get(name), str):
        return content[name], True
    pattern = r'"' + re.escape(name) + r'"\s*:\s*"((?:[^"\\]|\\.)*)(")?'
    match = re.search(pattern, _cut(content))
    if match is None:
        return None, False
    raw, closed = match.group(1), match.group(2) is not None
    if not closed:
        raw = re.sub(r"\\u[0-9a-fA-F]{0,3}$", "", raw)  # an escape the cut split in two
    value = _string(raw)
    return value, closed and value is not None


def values(content: Any, name: str) -> list[str]:
    """Every whole value of the string field `name` in a cut tool output's JSON prefix."""
    pattern = r'"' + re.escape(name) + r'"\s*:\s*"((?:[^"\\]|\\.)*)"'
    found = (_string(m.group(1)) for m in re.finditer(pattern, _cut(content)))
    return [value for value in found if value is not None]


def _cut(content: Any) -> str:
    """The JSON prefix of a cut tool output ("" for anything else)."""
    if isinstance(content, Mapping) and isinstance(content.get("start"), str):
        return str(content["start"])
    return content if isinstance(content, str) else ""


def _string(raw: str) -> str | None:
    """A JSON string literal's body, decoded."""
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


__all__ = [
    "RESULT_TOOLS",
    "Call",
    "Conversation",
    "Reply",
    "Step",
    "done",
    "field",
    "read_conversation",
    "values",
]
