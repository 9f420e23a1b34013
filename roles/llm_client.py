"""The port to a chat-completions endpoint, and its adapter over the official
`openai` client (optional extra `llm`; imported only when a model is configured).

`ChatModel.complete(messages, tools)` sends one request and returns a
`ModelReply`: the answer's text and its tool calls, names and argument strings
exactly as the endpoint sent them. Errors::

    PressroomError
    ├── InvalidInput        the `openai` package is missing, or no model is configured
    ├── ModelUnavailable    no answer: connection, timeout, 408/409/429, 5xx (try again later)
    └── ModelRefused        a definite refusal: another 4xx (key, model name, request)

Talks to the network (through the client); reads settings only from `Settings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, cast

from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput, PressroomError


class ModelUnavailable(PressroomError):
    """The endpoint gave no answer (connection, timeout, 408/409/429, 5xx); worth trying again later."""


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call in an answer: its id, the tool name and the argument string, as sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelReply:
    """What one chat completion said: its text and its tool calls, as sent, and the tokens it used
    (`usage.total_tokens`, when the endpoint reports it)."""

    text: str | None
    tool_calls: tuple[ModelToolCall, ...] = ()
    tokens: int | None = None


class ModelRefused(PressroomError):
    """The endpoint answered with a definite refusal (bad request, key, model name)."""


class ChatModel(Protocol):
    """The port to a chat-completions endpoint: one request, one reply."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply: ...


class OpenAIChat:
    """`ChatModel` over the official `openai` client (imported only when used).

    Without a `base_url` the client's own default endpoint applies. The client
    retries a failed request `max_retries` times before an error comes out.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise InvalidInput(
                "PRESSROOM_MODEL is set but the `openai` package is not installed; "
                "install the `llm` extra: pip install 'pressroom[llm]'"
            ) from exc
        self.model = model
        self._openai = openai  # its exception classes, kept without a module-level import
        # A key is always passed, so the client never looks for one elsewhere; local servers ignore it.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=max_retries
        )

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        errors = self._openai
        # Plain JSON-shaped dicts: the client's TypedDicts describe the same shapes.
        offer: dict[str, Any] = {"tools": tools, "tool_choice": "auto", "parallel_tool_calls": False}
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=cast(Any, messages), **(offer if tools else {})
            )
        except errors.APIStatusError as exc:
            if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                raise ModelUnavailable(
                    f"model endpoint answered {exc.status_code}", status=exc.status_code
                ) from None
            raise ModelRefused(
                f"model endpoint refused the request ({exc.status_code}): {exc.message}"[:300],
                status=exc.status_code,
            ) from None
        except errors.APIError as exc:
            raise ModelUnavailable(f"model endpoint unreachable: {type(exc).__name__}: {exc}"[:300]) from None
        usage = getattr(response, "usage", None)
        tokens = usage.total_tokens if usage is not None else None
        if not response.choices:
            return ModelReply(text=None, tokens=tokens)
        message = response.choices[0].message
        calls: list[ModelToolCall] = []
        for call in message.tool_calls or ():
            if call.type == "function":
                calls.append(ModelToolCall(call.id, call.function.name, call.function.arguments))
            else:  # a custom (free-text) tool call: no such tool is offered
                calls.append(ModelToolCall(call.id, call.custom.name, call.custom.input))
        return ModelReply(text=message.content, tool_calls=tuple(calls), tokens=tokens)


def open_chat(settings: Settings) -> ChatModel:
    """The configured endpoint's client (one per model, URL and key in this process)."""
    if not settings.model:
        raise InvalidInput("no model configured: set PRESSROOM_MODEL")
    key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
    return _cached_chat(settings.model, settings.model_base_url, key)


@lru_cache(maxsize=8)
def _cached_chat(model: str, base_url: str | None, api_key: str | None) -> OpenAIChat:
    return OpenAIChat(model, base_url=base_url, api_key=api_key)


__all__ = [
    "ChatModel",
    "ModelRefused",
    "ModelReply",
    "ModelToolCall",
    "ModelUnavailable",
    "OpenAIChat",
    "open_chat",
]
