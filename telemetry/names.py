"""Span names, attribute keys and metric names: every string the telemetry speaks.

Constants only, no imports of OpenTelemetry: the harness, the outbox and the
renderer spell a span or an attribute through these names, so a dashboard or a
test never has to guess how a word was written somewhere else.
"""

from __future__ import annotations

from typing import Final

# -- instrumentation scope ---------------------------------------------------
SCOPE: Final = "pressroom"

# -- the four phases of one action (in the order they happen) ----------------
PROPOSAL: Final = "proposal"
AUTHORIZATION: Final = "authorization"
SEND: Final = "send"
ACK: Final = "ack"
PHASES: Final[tuple[str, ...]] = (PROPOSAL, AUTHORIZATION, SEND, ACK)

# -- other span names ----------------------------------------------------------
ACTION: Final = "action"
"""Prefix of the one parent span per action: `action {tool}`."""
APPROVAL_WAIT: Final = "approval wait"
"""The wait from ready-for-review to a person's approval (explicit start/end)."""


def action_span_name(tool: str) -> str:
    """The name of an action's parent span, e.g. `action site.publish`."""
    return f"{ACTION} {tool}"


# -- Pressroom attributes ------------------------------------------------------
ATTR_SAGA_ID: Final = "pressroom.saga.id"
ATTR_SAGA_STATE: Final = "pressroom.saga.state"
ATTR_VERSION: Final = "pressroom.version"
ATTR_VERSION_DIGEST: Final = "pressroom.version.digest"
ATTR_TOOL: Final = "pressroom.tool"
ATTR_RISK: Final = "pressroom.risk"
ATTR_IDEMPOTENCY_KEY: Final = "pressroom.idempotency_key"
ATTR_DESTINATION: Final = "pressroom.destination"
ATTR_DESTINATION_SCHEME: Final = "pressroom.destination.scheme"
ATTR_APPROVER: Final = "pressroom.approver"
ATTR_OUTCOME: Final = "pressroom.outcome"
ATTR_ROLE: Final = "pressroom.role"
"""The pipeline's role name of a model call's turn."""
ATTR_MODEL_COST_USD: Final = "pressroom.model.cost_usd"
ATTR_MODEL_REPLAYED: Final = "pressroom.model.replayed"
"""True when a model call was answered from its record, without a request."""

# -- generative AI semantic conventions (a model call's span) --------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
OP_CHAT: Final = "chat"
PROVIDER_OPENAI: Final = "openai"


def model_span_name(model: str) -> str:
    """The name of a model call's span, as the conventions spell it: `chat {model}`."""
    return f"{OP_CHAT} {model}"


# -- messaging semantic conventions -----------------------------------------
MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_DESTINATION_NAME: Final = "messaging.destination.name"
MESSAGING_MESSAGE_ID: Final = "messaging.message.id"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"

# messaging.operation.type values
OP_CREATE: Final = "create"
OP_SEND: Final = "send"
OP_PROCESS: Final = "process"
OP_SETTLE: Final = "settle"

# messaging.system values for the brokers Pressroom runs on
SYSTEM_REDIS: Final = "redis"
SYSTEM_RABBITMQ: Final = "rabbitmq"
SYSTEM_INLINE: Final = "inline"

# -- metrics -----------------------------------------------------------------
METRIC_SAGAS: Final = "pressroom.sagas"
METRIC_SAGA_DURATION: Final = "pressroom.saga.duration"
METRIC_APPROVAL_WAIT: Final = "pressroom.approval.wait"
METRIC_OUTBOX_LAG: Final = "pressroom.outbox.lag"
METRIC_DESTINATION_DURATION: Final = "pressroom.destination.duration"
METRIC_DESTINATION_WAITS: Final = "pressroom.destination.waits"
METRIC_EFFECT_UNKNOWN: Final = "pressroom.effect_unknown"
METRIC_COMPENSATION_FAILED: Final = "pressroom.compensation_failed"
METRIC_DEAD_LETTERS: Final = "pressroom.dead_letters"
METRIC_REVIEWS_OVERDUE: Final = "pressroom.reviews.overdue"
METRIC_PRUNED: Final = "pressroom.pruned"
ATTR_TABLE: Final = "pressroom.table"

# -- service names (resource `service.name`) -----------------------------------
SERVICE_API: Final = "pressroom-api"
SERVICE_RELAY: Final = "pressroom-relay"
SERVICE_CLI: Final = "pressroom-cli"
SERVICE_DEMO: Final = "pressroom-demo"


def worker_service_name(queue: str) -> str:
    """The service name of a Celery worker process serving `queue`."""
    return f"pressroom-worker-{queue}"


__all__ = [
    "ACK",
    "ACTION",
    "APPROVAL_WAIT",
    "ATTR_APPROVER",
    "ATTR_DESTINATION",
    "ATTR_DESTINATION_SCHEME",
    "ATTR_IDEMPOTENCY_KEY",
    "ATTR_MODEL_COST_USD",
    "ATTR_MODEL_REPLAYED",
    "ATTR_ROLE",
    "ATTR_OUTCOME",
    "ATTR_RISK",
    "ATTR_SAGA_ID",
    "ATTR_SAGA_STATE",
    "ATTR_TOOL",
    "ATTR_VERSION",
    "ATTR_VERSION_DIGEST",
    "AUTHORIZATION",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_SEED",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "MESSAGING_DESTINATION_NAME",
    "MESSAGING_MESSAGE_ID",
    "MESSAGING_OPERATION_NAME",
    "MESSAGING_OPERATION_TYPE",
    "MESSAGING_SYSTEM",
    "METRIC_APPROVAL_WAIT",
    "METRIC_DEAD_LETTERS",
    "METRIC_PRUNED",
    "METRIC_REVIEWS_OVERDUE",
    "ATTR_TABLE",
    "METRIC_DESTINATION_DURATION",
    "METRIC_DESTINATION_WAITS",
    "METRIC_EFFECT_UNKNOWN",
    "METRIC_OUTBOX_LAG",
    "METRIC_SAGAS",
    "METRIC_SAGA_DURATION",
    "OP_CHAT",
    "OP_CREATE",
    "OP_PROCESS",
    "OP_SEND",
    "OP_SETTLE",
    "PHASES",
    "PROPOSAL",
    "PROVIDER_OPENAI",
    "SCOPE",
    "SEND",
    "SERVICE_API",
    "SERVICE_CLI",
    "SERVICE_DEMO",
    "SERVICE_RELAY",
    "SYSTEM_INLINE",
    "SYSTEM_RABBITMQ",
    "SYSTEM_REDIS",
    "action_span_name",
    "model_span_name",
    "worker_service_name",
]
