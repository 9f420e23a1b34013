"""A model call as a durable, budgeted step: `DurableChat`, a `ChatModel` around another.

One `DurableChat` serves one turn of one role (saga, role name, round). For
each `complete(messages, tools)`:

1. the request is digested (model, parameters, messages, tools) and keyed by
   (saga, role, round, digest); a reply recorded under that key is returned as
   it was, and nothing is sent (a turn run again after a crash asks nothing
   twice, and is not billed twice);
2. the role's budget (its own answered calls) and the saga's (all of them)
   are checked: a spent one raises `BudgetExhausted` with the reason line
   (`budget exhausted: ...`), and nothing is sent;
3. the profile's limits in this process (`roles.model_limits`: calls in
   flight, requests and tokens per minute, a cool-down after a 429) are
   asked for a place: when there is none, `ModelUnavailable` with the
   seconds to wait is raised at once, nothing is recorded nor sent, and the
   turn gives its thread back (the work's lease brings it back later); a
   turn running as a worker's waiting delivery (`outbox.waits`) holds no
   thread, and waits for a place instead (up to `LONGEST_QUEUE` seconds);
4. the intent is committed, then the inner model is asked with no
   transaction open, no connection checked out and no lock held (a call
   made inside a consumer's transaction that holds its work row raises
   `LeaseFirst` before anything is recorded, and the consumer runs the work
   again with its lease taken first), the call's key sent as the request's
   `Idempotency-Key`; `ModelUnavailable` is tried again after a backoff (full
   jitter, at least the server's `Retry-After`) up to the profile's
   `max_retries`, then recorded as a failure and raised (the work's lease
   brings the turn back later); a 429 cools its profile down (and only its
   profile), and one asking for more than `LONGEST_SLEEP` seconds is not
   waited for on the thread; `ModelRefused` is recorded and raised (the
   role fails with its reason);
5. the reply is recorded with its tokens, cost and latency (and charged to
   the saga, with its `model` event) and returned; its place is given back
   with the tokens it used.

A reply replayed from its record takes no place.

Each call has a span named and attributed by OpenTelemetry's generative-AI
conventions (`chat {model}`, `gen_ai.*`), plus the saga, the role, the cost
and whether the reply was replayed from its record.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.trace import SpanKind
from sqlalchemy.engine import Engine

from orchestrator.core.errors import LeaseFirst
from orchestrator.core.pipeline import Budget, ModelProfile
from orchestrator.harness.budget import BudgetExhausted
from orchestrator.harness.digests import canonical_json
from orchestrator.harness.model_calls import (
    CallAnswer,
    CallIntent,
    CallRecord,
    ModelCallLog,
    Usage,
    backoff,
    call_key,
    cost_usd,
    over_budget,
    request_digest,
)
from orchestrator.store.model_calls import StoredModelCalls
from outbox.handlers import inside_work_transaction
from outbox.waits import pause, waiting_here
from roles.llm_client import ChatModel, ModelReply, ModelToolCall, ModelUnavailable, chat_for
from roles.model_limits import ModelLimits, token_estimate
from telemetry import names
from telemetry.spans import annotate, open_span

MAX_ERROR_CHARS: Final = 2000
LONGEST_SLEEP: Final = 5.0  # seconds: a server asking for a longer wait gets the thread back
LONGEST_QUEUE: Final = 60.0  # seconds a waiting delivery waits for a place before it defers to its lease
PROCESS_LIMITS: Final = ModelLimits()  # every profile's limits in this process


def params_of(profile: ModelProfile) -> dict[str, Any]:
    """The request parameters a profile sends (and the digest covers)."""
    return {"temperature": profile.temperature, "seed": profile.seed, "max_tokens": profile.max_tokens}


def reply_json(reply: ModelReply) -> dict[str, Any]:
    """A reply as it is recorded: `text`, `tool_calls` [{id, name, arguments}], `finish_reason`, `model`."""
    return {
        "text": reply.text,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        "finish_reason": reply.finish_reason,
        "model": reply.model,
    }


def recorded_reply(record: CallRecord) -> ModelReply:
    """The `ModelReply` a recorded call answered with, as it was."""
    body = record.reply or {}
    tokens_in, tokens_out = record.tokens_in, record.tokens_out
    return ModelReply(
        text=body.get("text"),
        tool_calls=tuple(
            ModelToolCall(c["id"], c["name"], c["arguments"]) for c in body.get("tool_calls", ())
        ),
        tokens=None if tokens_in is None or tokens_out is None else tokens_in + tokens_out,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        finish_reason=body.get("finish_reason"),
        model=body.get("model"),
    )


class DurableChat:
    """`ChatModel` for one role's turn: replayed from the record, budgeted, retried, recorded."""

    def __init__(
        self,
        inner: ChatModel,
        log: ModelCallLog,
        *,
        saga_id: str,
        role: str,
        round: int,
        request_id: str | None,
        profile_name: str,
        profile: ModelProfile,
        role_budget: Budget | None = None,
        saga_budget: Budget | None = None,
        sleep: Callable[[float], None] = pause,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        limits: ModelLimits | None = None,
    ) -> None:
        self.inner = inner
        self.limits = limits if limits is not None else PROCESS_LIMITS
        self.log = log
        self.saga_id, self.role, self.round, self.request_id = saga_id, role, round, request_id
        self.profile_name, self.profile = profile_name, profile
        self.role_budget, self.saga_budget = role_budget, saga_budget
        self.sleep, self.clock = sleep, clock
        self.rng = rng or random.Random()
        self.params = params_of(profile)
        self.requests = 0  # sent by this object (retries included)
        self.replayed = 0  # answered from the record, without a request

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ModelReply:
        """The reply to this request in this turn: recorded, or asked (under the call's key as
        its idempotency key; a key given here is not used) and recorded."""
        digest = request_digest(self.profile.model, self.params, messages, tools)
        intent = CallIntent(
            key=call_key(self.saga_id, self.role, self.round, digest),
            saga_id=self.saga_id,
            role=self.role,
            round=self.round,
            request_id=self.request_id,
            profile=self.profile_name,
            model=self.profile.model,
            params=self.params,
            request_digest=digest,
        )
        name = names.model_span_name(self.profile.model)
        with open_span(name, self._request_attributes(), kind=SpanKind.CLIENT, expected=(BudgetExhausted,)):
            found = self.log.recorded(intent.key)
            if found is not None and found.state == "answered":
                self.replayed += 1
                return self._answered(found, replayed=True)
            if inside_work_transaction():
                raise LeaseFirst(f"the {self.role} role calls a model: its lease first", saga_id=self.saga_id)
            self._refuse_when_spent()
            self._take_place(messages, tools)
            used: int | None = None
            try:
                self.log.record_intent(intent)
                answer = self._ask(intent, messages, tools)
                used = answer.tokens_in + answer.tokens_out
            finally:
                self.limits.release(self.profile, used)
            return self._answered(self.log.record_reply(intent, answer), replayed=False)

    def _take_place(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        """A place among the profile's calls, or `ModelUnavailable` with the seconds to wait
        (nothing sent, nothing recorded: the turn gives its thread back). A turn running as a
        worker's waiting delivery (`outbox.waits`) holds no thread while it waits: it waits
        for a place, each wait at most `LONGEST_SLEEP` and all of them `LONGEST_QUEUE`."""
        prompt_chars = len(canonical_json({"messages": messages, "tools": tools}))
        estimate = token_estimate(self.profile, prompt_chars)
        queued = 0.0
        while (wait := self.limits.take(self.profile, estimate)) is not None:
            if not waiting_here() or wait > LONGEST_SLEEP or queued + wait > LONGEST_QUEUE:
                raise ModelUnavailable(
                    f"model {self.profile.model} is at its limit in this process (in flight, per minute "
                    f"or cooling down after a 429); try again in {wait:.1f}s",
                    retry_after=wait,
                )
            self.sleep(wait)
            queued += wait

    def _refuse_when_spent(self) -> None:
        """`BudgetExhausted` when the role's or the saga's budget is spent (nothing is sent)."""
        if self.role_budget is None and self.saga_budget is None:
            return
        totals = self.log.usage(self.saga_id)
        spent_by_role = Usage.of(totals.get("by_role", {}).get(self.role))
        reason = over_budget(spent_by_role, self.role_budget, f"role {self.role}") or over_budget(
            Usage.of(totals), self.saga_budget, f"saga {self.saga_id}"
        )
        if reason is not None:
            raise BudgetExhausted(reason, saga_id=self.saga_id, role=self.role)

    def _ask(
        self, intent: CallIntent, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> CallAnswer:
        """The inner model's answer, retried while unavailable; a failure is recorded, then raised.
        No transaction is open here."""
        attempt = 0
        while True:
            attempt += 1
            self.requests += 1
            started = self.clock()
            try:
                reply = self.inner.complete(messages, tools, idempotency_key=intent.key)
            except ModelUnavailable as exc:
                if exc.status == 429:
                    self.limits.cool_down(self.profile, exc.retry_after)
                if not self._retry(attempt, exc):
                    self.log.record_failure(intent.key, str(exc)[:MAX_ERROR_CHARS], attempt)
                    raise
                continue
            except Exception as exc:  # a refusal (ModelRefused) or anything else: no answer to keep
                self.log.record_failure(intent.key, f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS], attempt)
                raise
            latency_ms = round((self.clock() - started) * 1000)
            tokens_in, tokens_out = reply.tokens_in or 0, reply.tokens_out or 0
            return CallAnswer(
                reply=reply_json(reply),
                call_id=reply.tool_calls[0].id if reply.tool_calls else None,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=cost_usd(self.profile, tokens_in, tokens_out),
                latency_ms=max(0, latency_ms),
                attempts=attempt,
            )

    def _retry(self, attempt: int, exc: ModelUnavailable) -> bool:
        """Wait and say yes while retries are left; no when they are spent, or when the server
        asks for a longer wait than a turn sleeps on its thread (the lease brings the turn back)."""
        if attempt > self.profile.max_retries:
            return False
        if exc.retry_after is not None and exc.retry_after > LONGEST_SLEEP:
            return False
        self.sleep(backoff(attempt, exc.retry_after, rng=self.rng))
        return True

    def _request_attributes(self) -> dict[str, object]:
        return {
            names.GEN_AI_OPERATION_NAME: names.OP_CHAT,
            names.GEN_AI_PROVIDER_NAME: names.PROVIDER_OPENAI,
            names.GEN_AI_REQUEST_MODEL: self.profile.model,
            names.GEN_AI_REQUEST_TEMPERATURE: self.profile.temperature,
            names.GEN_AI_REQUEST_SEED: self.profile.seed,
            names.GEN_AI_REQUEST_MAX_TOKENS: self.profile.max_tokens,
            names.ATTR_SAGA_ID: self.saga_id,
            names.ATTR_ROLE: self.role,
        }

    @staticmethod
    def _answered(record: CallRecord, *, replayed: bool) -> ModelReply:
        """The recorded reply, its response attributes on the call's span."""
        reply = recorded_reply(record)
        annotate(
            {
                names.GEN_AI_RESPONSE_MODEL: reply.model,
                names.GEN_AI_RESPONSE_FINISH_REASONS: [reply.finish_reason] if reply.finish_reason else None,
                names.GEN_AI_USAGE_INPUT_TOKENS: reply.tokens_in,
                names.GEN_AI_USAGE_OUTPUT_TOKENS: reply.tokens_out,
                names.ATTR_MODEL_COST_USD: record.cost_usd,
                names.ATTR_MODEL_REPLAYED: replayed,
            }
        )
        return reply


def durable_chat(
    engine: Engine,
    *,
    saga_id: str,
    role: str,
    round: int,
    request_id: str | None,
    profile_name: str,
    profile: ModelProfile,
    role_budget: Budget | None = None,
    saga_budget: Budget | None = None,
    inner: ChatModel | None = None,
) -> DurableChat:
    """A `DurableChat` recording in `engine`'s database, around the profile's client
    (`chat_for`) unless `inner` is given."""
    return DurableChat(
        inner or chat_for(profile),
        StoredModelCalls(engine),
        saga_id=saga_id,
        role=role,
        round=round,
        request_id=request_id,
        profile_name=profile_name,
        profile=profile,
        role_budget=role_budget,
        saga_budget=saga_budget,
    )


__all__ = ["DurableChat", "durable_chat", "params_of", "recorded_reply", "reply_json"]
