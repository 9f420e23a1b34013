"""The port to a chat-completions endpoint, and its adapter over the official
`openai` client (optional extra `llm`; imported only when a model is configured).

`ChatModel.complete(messages, tools, idempotency_key=KEY)` sends one request
(with an `Idempotency-Key` header naming the call, when given) and returns a
`ModelReply`: the answer's text and its tool calls, names and argument strings
exactly as the endpoint sent them, its usage, finish reason and model. Errors::

    PressroomError
    ├── InvalidInput        the `openai` package is missing, or no model is configured
    ├── ModelUnavailable    no answer: connection, timeout, 408/409/429, 5xx (try again later;
    │                       `retry_after`: the seconds the server asked for, if it did)
    └── ModelRefused        a definite refusal: another 4xx (key, model name, request)

`chat_for(profile)` is the client of a pipeline's model profile: its parameters
(temperature, seed, max_tokens, timeout) go with every request and the client
never retries on its own (`roles.durable_model` decides). It is the async
client behind `WaitingChat`: a turn running on a worker's waiting loops
(`outbox.waits`) holds no thread while the endpoint answers. The key is read from
the variable the profile names when the client is asked for, never from a file.

Talks to the network (through the client); reads settings only through
`orchestrator.core.config`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any, Final, Protocol, cast

from orchestrator.core.config import Settings, named_secret
from orchestrator.core.errors import InvalidInput, PressroomError
from orchestrator.core.pipeline import ModelProfile
from outbox.waits import wait

NO_KEY: Final = "unused"  # sent when no key is configured: local servers ignore it
MAX_RETRY_AFTER: Final = 24 * 3600.0  # a longer (or nonsensical) Retry-After is not believed
IDEMPOTENCY_HEADER: Final = "Idempotency-Key"


class ModelUnavailable(PressroomError):
    """The endpoint gave no answer (connection, timeout, 408/409/429, 5xx); worth trying again later.

    `status` is the HTTP status when there was one; `retry_after` the seconds the
    server asked to wait (`Retry-After` or `retry-after-ms`), None when it did not say.
    """

    status: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call in an answer: its id, the tool name and the argument string, as sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelReply:
    """What one chat completion said: its text and its tool calls, as sent; the tokens it used
    (`usage.total_tokens`, `prompt_tokens` and `completion_tokens`, when the endpoint reports
    them); why it stopped (`finish_reason`) and the model that answered (the response's)."""

    text: str | None
    tool_calls: tuple[ModelToolCall, ...] = ()
    tokens: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = None
    model: str | None = None


class ModelRefused(PressroomError):
    """The endpoint answered with a definite refusal (bad request, key, model name)."""


class ChatModel(Protocol):
    """The port to a chat-completions endpoint: one request, one reply. `idempotency_key`
    names the call: a request sent again for the same call carries the same key."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply: ...


class AsyncChatModel(Protocol):
    """`ChatModel`'s request, awaited: for a caller on an event loop (`WaitingChat`)."""

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply: ...


class _OpenAIRequests:
    """What both `openai` adapters share: the package, the parameters, each request's
    arguments, and how the client's errors become `ModelUnavailable` or `ModelRefused`."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 0,
        temperature: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise InvalidInput(
                "a model is configured but the `openai` package is not installed; "
                "install the `llm` extra: pip install 'pressroom[llm]'"
            ) from exc
        self.model = model
        self._openai = openai  # its exception classes, kept without a module-level import
        self.base_url, self.api_key = base_url, api_key or NO_KEY
        self.timeout, self.max_retries = timeout, max_retries
        chosen = {"temperature": temperature, "seed": seed, "max_tokens": max_tokens}
        self.params: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}

    def _arguments(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], idempotency_key: str | None
    ) -> dict[str, Any]:
        # Plain JSON-shaped dicts: the client's TypedDicts describe the same shapes.
        offer: dict[str, Any] = {"tools": tools, "tool_choice": "auto", "parallel_tool_calls": False}
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key else None
        return {
            "model": self.model,
            "messages": cast(Any, messages),
            "extra_headers": headers,
            **self.params,
            **(offer if tools else {}),
        }

    def _failure(self, exc: Exception) -> PressroomError | None:
        """What a client error means (None: not one of the client's)."""
        errors = self._openai
        if isinstance(exc, errors.APIStatusError):
            if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                return ModelUnavailable(
                    f"model endpoint answered {exc.status_code}",
                    status=exc.status_code,
                    retry_after=retry_after(exc.response.headers),
                )
            return ModelRefused(
                f"model endpoint refused the request ({exc.status_code}): {exc.message}"[:300],
                status=exc.status_code,
            )
        if isinstance(exc, errors.APIError):
            return ModelUnavailable(f"model endpoint unreachable: {type(exc).__name__}: {exc}"[:300])
        return None


class OpenAIChat(_OpenAIRequests):
    """`ChatModel` over the official `openai` client (imported only when used).

    Without a `base_url` the client's own default endpoint applies. `temperature`,
    `seed` and `max_tokens` go with every request when given. The client retries a
    failed request `max_retries` times before an error comes out (0: never; a
    caller with its own retries, `roles.durable_model`, wants that). Clients are
    shared per endpoint, model, key, timeout and retries in this process.
    """

    def __init__(self, model: str, **options: Any) -> None:
        super().__init__(model, **options)
        self._client = _client(self.base_url, model, self.api_key, self.timeout, self.max_retries)

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply:
        try:
            response = self._client.chat.completions.create(
                **self._arguments(messages, tools, idempotency_key)
            )
        except Exception as exc:
            if (failure := self._failure(exc)) is None:
                raise
            raise failure from None
        return _reply(response)


class AsyncOpenAIChat(_OpenAIRequests):
    """`AsyncChatModel` over the `openai` package's async client: as `OpenAIChat`, with one
    client per endpoint, model, key, timeout and retries on each event loop that asks."""

    def client(self) -> Any:
        """The client of the running event loop."""
        loop = id(asyncio.get_running_loop())
        return _async_client(loop, self.base_url, self.model, self.api_key, self.timeout, self.max_retries)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply:
        try:
            response = await self.client().chat.completions.create(
                **self._arguments(messages, tools, idempotency_key)
            )
        except Exception as exc:
            if (failure := self._failure(exc)) is None:
                raise
            raise failure from None
        return _reply(response)


class WaitingChat:
    """`ChatModel` over an `AsyncChatModel`: each request is awaited through
    `outbox.waits.wait`, so a delivery running on a worker's waiting loops gives its thread
    back while the endpoint answers (anywhere else the caller's thread waits)."""

    def __init__(self, inner: AsyncChatModel) -> None:
        self.inner = inner

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply:
        return wait(lambda: self.inner.complete(messages, tools, idempotency_key=idempotency_key))


def _reply(response: Any) -> ModelReply:
    usage = getattr(response, "usage", None)
    model = getattr(response, "model", None)
    tokens, tokens_in, tokens_out = (
        (usage.total_tokens, usage.prompt_tokens, usage.completion_tokens)
        if usage is not None
        else (None,) * 3
    )
    if not response.choices:
        return ModelReply(None, (), tokens, tokens_in, tokens_out, None, model)
    choice = response.choices[0]
    message = choice.message
    calls: list[ModelToolCall] = []
    for call in message.tool_calls or ():
        if call.type == "function":
            calls.append(ModelToolCall(call.id, call.function.name, call.function.arguments))
        else:  # a custom (free-text) tool call: no such tool is offered
            calls.append(ModelToolCall(call.id, call.custom.name, call.custom.input))
    return ModelReply(
        message.content, tuple(calls), tokens, tokens_in, tokens_out, choice.finish_reason, model
    )


def retry_after(headers: Any, *, now: datetime | None = None) -> float | None:
    """The seconds a response asked to wait: `retry-after-ms`, or `Retry-After` in seconds or as
    an HTTP date; None when it asked nothing (or something unbelievable). An HTTP date is
    measured from the response's own `Date` when it has one: both are the server's clock, so
    a server whose clock is minutes off ours still gets the wait it asked for."""
    seconds: float | None = None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            seconds = float(ms) / 1000
        elif (value := headers.get("retry-after")) is not None:
            try:
                seconds = float(value)
            except ValueError:
                sent = headers.get("date")
                since = parsedate_to_datetime(sent) if sent else (now or datetime.now(UTC))
                seconds = (parsedate_to_datetime(value) - since).total_seconds()
    except (TypeError, ValueError):
        return None
    if seconds is None or not 0 <= seconds <= MAX_RETRY_AFTER:  # NaN fails both comparisons
        return None
    return seconds


@lru_cache(maxsize=32)
def _client(base_url: str | None, model: str, api_key: str, timeout: float, max_retries: int) -> Any:
    """One `openai.OpenAI` (its connection pool) per endpoint, model, key, timeout and retries."""
    import openai

    # A key is always passed, so the client never looks for one elsewhere.
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


@lru_cache(maxsize=64)
def _async_client(
    loop: int, base_url: str | None, model: str, api_key: str, timeout: float, max_retries: int
) -> Any:
    """One `openai.AsyncOpenAI` per event loop (`loop`: its id; a loop lives as long as its
    process), endpoint, model, key, timeout and retries."""
    import openai

    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


def chat_for(profile: ModelProfile) -> WaitingChat:
    """The client of a pipeline's model profile: its requests awaited (`WaitingChat`) on the
    async client. Its key is read now from the variable the profile names (`api_key_env`;
    none: no key); a changed key gets a client of its own."""
    secret = named_secret(profile.api_key_env) if profile.api_key_env else None
    return WaitingChat(
        AsyncOpenAIChat(
            profile.model,
            base_url=profile.base_url,
            api_key=secret.get_secret_value() if secret else None,
            timeout=profile.timeout,
            max_retries=0,
            temperature=profile.temperature,
            seed=profile.seed,
            max_tokens=profile.max_tokens,
        )
    )


def open_chat(settings: Settings) -> ChatModel:
    """The configured endpoint's client (one per model, URL and key in this process)."""
    if not settings.model:
        raise InvalidInput("no model configured: set PRESSROOM_MODEL")
    key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
    return _cached_chat(settings.model, settings.model_base_url, key)


@lru_cache(maxsize=8)
def _cached_chat(model: str, base_url: str | None, api_key: str | None) -> OpenAIChat:
    # This path has no retry loop of its own: the client retries.
    return OpenAIChat(model, base_url=base_url, api_key=api_key, max_retries=2)


__all__ = [
    "IDEMPOTENCY_HEADER",
    "AsyncChatModel",
    "AsyncOpenAIChat",
    "ChatModel",
    "ModelRefused",
    "ModelReply",
    "ModelToolCall",
    "ModelUnavailable",
    "OpenAIChat",
    "WaitingChat",
    "chat_for",
    "open_chat",
    "retry_after",
]
