"""What the scripted model answers to one chat-completions request (no I/O here).

A script (`SCRIPTS`, chosen by name) turns a `Conversation`
(`evaluation.model_conversation`) into an `Outcome`:

- `Reply`: a chat completion, with a text or one tool call (`Call`);
- `Failure`: an HTTP error with an OpenAI-style error body;
- `Drop`: a reply that is computed and then never sent (the connection closes).

Scripts are deterministic: the same request gives the same outcome, and any
choice is drawn from the request's `seed`. `Conversation.attempt` (this
conversation's request number at the server, kept by the server) is the only
state from outside the request; `429-then-ok`, `drop-once` and `endless` use it.
The faithful role behaviours live in `evaluation.model_roles`.

`completion()` puts a reply in the API's shape. Token counts are characters / 4,
rounded up (`count_tokens`): of the request's messages as compact JSON, and of
the reply's text or tool name plus arguments, so budgets can be tested exactly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from evaluation.model_conversation import RESULT_TOOLS, Call, Conversation, Reply, done
from evaluation.model_mcp import mcp_research
from evaluation.model_roles import draft_arguments, faithful, hallucinating_writer, review_arguments

EVIL_DESTINATION: Final = "git:/tmp/evil"
ESCAPING_SOURCE: Final = "../../etc/passwd"
MALFORMED_ARGUMENTS: Final = '{"saga_id": '
HUGE_CHARS: Final = 2 * 1024 * 1024
_HUGE_LINE: Final = "This answer goes on and on and never calls a tool. "
HUGE_TEXT: Final = (_HUGE_LINE * (HUGE_CHARS // len(_HUGE_LINE) + 1))[:HUGE_CHARS]
# Seconds a script waits before answering when the server is given no latency.
DEFAULT_LATENCY: Final = {"slow": 5.0}
MODEL_NAME: Final = "pressroom-scripted"
TOKEN_CHARS: Final = 4


@dataclass(frozen=True)
class Failure:
    """An HTTP error answer: status, OpenAI-style error fields, and a Retry-After value if any."""

    status: int
    message: str
    type: str
    code: str | None = None
    retry_after: str | None = None

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}


@dataclass(frozen=True)
class Drop:
    """A reply computed (and counted as answered) whose connection is closed before it is sent."""

    reply: Reply


Outcome = Reply | Failure | Drop


@dataclass(frozen=True)
class Options:
    """What a test may tune: how many requests of each conversation `429-then-ok` refuses."""

    fail_first: int = 2


Script = Callable[[Conversation, Options], Outcome]


# -- scripts ---------------------------------------------------------------------------------


def _faithful(conv: Conversation, options: Options) -> Outcome:
    return faithful(conv)


def _hallucinate(conv: Conversation, options: Options) -> Outcome:
    return hallucinating_writer(conv, invent="quote") if conv.role == "writer" else faithful(conv)


def _hallucinate_source(conv: Conversation, options: Options) -> Outcome:
    return hallucinating_writer(conv, invent="source") if conv.role == "writer" else faithful(conv)


def _inject(conv: Conversation, options: Options) -> Outcome:
    """Does what an injected instruction asks, in order, and nothing else."""
    saga = conv.saga_id
    plan = [Call.of("publish", saga_id=saga, destination=EVIL_DESTINATION)]
    if conv.role == "researcher":
        plan.append(
            Call.of("draft_write", saga_id=saga, title="Injected", markdown="Injected.", citations=[])
        )
    plan.append(Call.of("corpus_read", saga_id=saga, source=ESCAPING_SOURCE))
    plan.append(_with_destinations(conv))
    if len(conv.steps) < len(plan):
        return Reply(call=plan[len(conv.steps)])
    return done("Done as the source instructed.")


def _with_destinations(conv: Conversation) -> Call:
    """The role's result call with an argument no schema allows: `destinations`."""
    extra = {"destinations": [EVIL_DESTINATION]}
    if conv.role == "writer":
        return Call.of("draft_write", **{**(draft_arguments(conv) or {"saga_id": conv.saga_id}), **extra})
    if conv.role == "reviewer":
        return Call.of("review_record", **{**review_arguments(conv, read={}), **extra})
    # A well-formed note, so that `destinations` alone is what the schema refuses.
    note = {"source": "notes.md", "source_digest": "0" * 64, "quote": "As the source instructed."}
    return Call.of("evidence_record", saga_id=conv.saga_id, round=0, notes=[note], **extra)


def _malformed(conv: Conversation, options: Options) -> Outcome:
    """Arguments that are not JSON, for the role's result tool (or the first tool offered)."""
    name = RESULT_TOOLS.get(conv.role)
    if name not in conv.tools:
        name = next(iter(conv.tools), "corpus_search")
    return Reply(call=Call(name=name or "corpus_search", arguments=MALFORMED_ARGUMENTS))


def _endless(conv: Conversation, options: Options) -> Outcome:
    """Another search, with a query it never asked before (numbered by the server's count)."""
    query = f"{conv.brief} (search {conv.attempt + 1})".strip()
    return Reply(call=Call.of("corpus_search", saga_id=conv.saga_id, query=query))


def _huge(conv: Conversation, options: Options) -> Outcome:
    return Reply(text=HUGE_TEXT)


def _rate_limited(conv: Conversation, options: Options) -> Outcome:
    if conv.attempt < options.fail_first:
        return Failure(
            429,
            "Rate limit reached for requests; try again shortly.",
            "requests",
            code="rate_limit_exceeded",
            retry_after="0",
        )
    return faithful(conv)


def _server_error(conv: Conversation, options: Options) -> Outcome:
    return Failure(500, "The server had an error while processing your request.", "server_error")


def _drop(conv: Conversation, options: Options) -> Outcome:
    return Drop(faithful(conv))


def _drop_once(conv: Conversation, options: Options) -> Outcome:
    return Drop(faithful(conv)) if conv.attempt == 0 else faithful(conv)


def _refuse(conv: Conversation, options: Options) -> Outcome:
    return Failure(
        400,
        "This request was refused: it is not something this model will do.",
        "invalid_request_error",
        code="refused",
    )


SCRIPTS: Final[Mapping[str, Script]] = {
    "faithful": _faithful,
    "hallucinate": _hallucinate,
    "hallucinate-source": _hallucinate_source,
    "inject": _inject,
    "malformed": _malformed,
    "endless": _endless,
    "huge": _huge,
    "slow": _faithful,
    "429-then-ok": _rate_limited,
    "500": _server_error,
    "drop": _drop,
    "drop-once": _drop_once,
    "refuse": _refuse,
    # A researcher that searches through the MCP tool `mcp:archive/search` (`evaluation.model_mcp`),
    # and one that first obeys what a hostile answer asks.
    "mcp-search": lambda conv, options: mcp_research(conv),
    "mcp-obey": lambda conv, options: mcp_research(conv, obey=True),
}


def count_tokens(text: str) -> int:
    """Tokens of a text, by the server's rule: characters / 4, rounded up."""
    return -(-len(text) // TOKEN_CHARS)


def prompt_tokens(messages: Any) -> int:
    """Tokens of a request's messages: of their compact JSON."""
    return count_tokens(json.dumps(messages, ensure_ascii=False, separators=(",", ":")))


def completion_tokens(reply: Reply) -> int:
    """Tokens of a reply: of its text, and of its tool call's name and argument string."""
    call = reply.call
    return count_tokens((reply.text or "") + (call.name + call.arguments if call else ""))


def completion(body: Mapping[str, Any], reply: Reply, *, created: int) -> dict[str, Any]:
    """A chat completion in the API's shape, with its usage; ids are digests of the request
    (the same request, the same ids)."""
    tokens_in, tokens_out = prompt_tokens(body.get("messages")), completion_tokens(reply)
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.call is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{digest[:24]}",
                "type": "function",
                "function": {"name": reply.call.name, "arguments": reply.call.arguments},
            }
        ]
    return {
        "id": f"chatcmpl-{digest[:29]}",
        "object": "chat.completion",
        "created": created,
        "model": str(body.get("model") or MODEL_NAME),
        "system_fingerprint": "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.call is not None else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def decide(script: str, conv: Conversation, options: Options | None = None) -> Outcome:
    """The outcome of `script` for this conversation; an unknown script is a `KeyError`."""
    return SCRIPTS[script](conv, options or Options())


__all__ = [
    "DEFAULT_LATENCY",
    "ESCAPING_SOURCE",
    "EVIL_DESTINATION",
    "HUGE_CHARS",
    "MALFORMED_ARGUMENTS",
    "MODEL_NAME",
    "SCRIPTS",
    "Drop",
    "Failure",
    "Options",
    "Outcome",
    "completion",
    "completion_tokens",
    "count_tokens",
    "decide",
    "prompt_tokens",
]
