"""Metric instruments and the small functions that record them.

Instruments are created lazily from the MeterProvider installed with
`use_meter_provider` (setup.configure_metrics does that), else from the global
one, and created again when the provider changes. API only: recording costs
nothing when metrics are off.

| instrument                        | kind                  | unit   | attributes                     |
|-----------------------------------|-----------------------|--------|--------------------------------|
| pressroom.sagas                   | async up-down counter | {saga} | pressroom.saga.state           |
| pressroom.saga.duration           | histogram             | s      | pressroom.saga.state           |
| pressroom.approval.wait           | histogram             | s      |                                |
| pressroom.outbox.lag              | histogram             | s      | messaging.destination.name     |
| pressroom.destination.duration    | histogram             | s      | scheme, pressroom.outcome      |
| pressroom.destination.waits       | counter               | {publish} | pressroom.destination.scheme |
| pressroom.effect_unknown          | counter               | {step} | pressroom.destination.scheme   |
| pressroom.compensation_failed     | counter               | {step} | pressroom.destination.scheme   |
| pressroom.dead_letters            | counter               | {message} | messaging.destination.name  |
| pressroom.reviews.overdue         | async gauge           | {saga} |                                |
| pressroom.pruned                  | counter               | {row}  | pressroom.table                |
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Counter, Histogram, MeterProvider, Observation

from telemetry import names

SagaStateSource = Callable[[], Mapping[str, int]]
OverdueSource = Callable[[], int]
"""Returns the number of sagas waiting in ready-for-review past PRESSROOM_REVIEW_REMINDER."""
"""Returns the number of sagas in each state, e.g. `{"executing": 2, "succeeded": 40}`."""

# Seconds, not the SDK's default millisecond-shaped buckets.
_FAST_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_SAGA_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 86400.0)
_HUMAN_BUCKETS: Final = (60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 8 * 3600.0, 86400.0, 3 * 86400.0)


@dataclass(frozen=True, slots=True)
class _Instruments:
    provider: MeterProvider
    saga_duration: Histogram
    approval_wait: Histogram
    outbox_lag: Histogram
    destination_duration: Histogram
    destination_waits: Counter
    effect_unknown: Counter
    compensation_failed: Counter
    dead_letters: Counter
    pruned: Counter


_lock = threading.Lock()
_provider: MeterProvider | None = None
_instruments: _Instruments | None = None
_saga_states: SagaStateSource | None = None
_overdue: OverdueSource | None = None


def use_meter_provider(provider: MeterProvider | None) -> None:
    """Record to `provider` from now on; None falls back to the global provider."""
    global _provider, _instruments
    with _lock:
        _provider = provider
        _instruments = None
    _current()  # so the saga-state gauge exists before the first collection


def current_meter_provider() -> MeterProvider:
    """The provider Pressroom metrics go to right now."""
    return _provider if _provider is not None else metrics.get_meter_provider()


def set_saga_state_counter(callback: SagaStateSource | None) -> None:
    """Register the function that counts sagas by state (read at each collection)."""
    global _saga_states
    _saga_states = callback
    _current()


def set_overdue_reviews_counter(callback: OverdueSource | None) -> None:
    """Register the function that counts overdue reviews (read at each collection)."""
    global _overdue
    _overdue = callback
    _current()


def record_dead_letter(queue: str | None) -> None:
    """A message was set aside as a dead letter."""
    _current().dead_letters.add(1, {names.MESSAGING_DESTINATION_NAME: queue or "unknown"})


def record_pruned(table: str, rows: int) -> None:
    """Retention removed `rows` rows from `table`."""
    if rows:
        _current().pruned.add(rows, {names.ATTR_TABLE: table})


def record_saga_finished(state: str, seconds: float) -> None:
    """A saga reached a final state after `seconds` from submission."""
    _current().saga_duration.record(_seconds(seconds), {names.ATTR_SAGA_STATE: state})


def record_approval_wait(seconds: float) -> None:
    """A version waited `seconds` between ready-for-review and its approval."""
    _current().approval_wait.record(_seconds(seconds))


def record_outbox_lag(seconds: float, queue: str) -> None:
    """An outbox row for `queue` reached the broker `seconds` after it was written."""
    _current().outbox_lag.record(_seconds(seconds), {names.MESSAGING_DESTINATION_NAME: queue})


def record_destination_latency(scheme: str, seconds: float, outcome: str) -> None:
    """A call to a destination (`site`, `git`, `webhook`…) took `seconds` and ended in `outcome`."""
    _current().destination_duration.record(
        _seconds(seconds), {names.ATTR_DESTINATION_SCHEME: scheme, names.ATTR_OUTCOME: outcome}
    )


def record_destination_wait(scheme: str) -> None:
    """A publish was parked: its destination had PRESSROOM_DESTINATION_CONCURRENCY calls in flight."""
    _current().destination_waits.add(1, {names.ATTR_DESTINATION_SCHEME: scheme})


def record_effect_unknown(scheme: str) -> None:
    """A step's outcome could not be known (the saga went to effect-unknown)."""
    _current().effect_unknown.add(1, {names.ATTR_DESTINATION_SCHEME: scheme})


def record_compensation_failed(scheme: str) -> None:
    """A step's undo failed after its retries, or may have happened (the saga waits for a person)."""
    _current().compensation_failed.add(1, {names.ATTR_DESTINATION_SCHEME: scheme})


def _seconds(value: float) -> float:
    # Clocks of two processes can disagree by a little; a histogram refuses negatives.
    return max(0.0, float(value))


def _observe_sagas(options: CallbackOptions) -> Iterable[Observation]:
    source = _saga_states
    if source is None:
        return []
    return [Observation(count, {names.ATTR_SAGA_STATE: state}) for state, count in source().items()]


def _observe_overdue(options: CallbackOptions) -> Iterable[Observation]:
    source = _overdue
    return [] if source is None else [Observation(source())]


def _current() -> _Instruments:
    global _instruments
    provider = current_meter_provider()
    built = _instruments
    if built is not None and built.provider is provider:
        return built
    with _lock:
        if _instruments is None or _instruments.provider is not provider:
            _instruments = _build(provider)
        return _instruments


def _build(provider: MeterProvider) -> _Instruments:
    meter = provider.get_meter(names.SCOPE)
    meter.create_observable_up_down_counter(
        names.METRIC_SAGAS, callbacks=[_observe_sagas], unit="{saga}", description="Sagas by state"
    )
    meter.create_observable_gauge(
        names.METRIC_REVIEWS_OVERDUE,
        callbacks=[_observe_overdue],
        unit="{saga}",
        description="Sagas waiting in ready-for-review longer than PRESSROOM_REVIEW_REMINDER",
    )
    return _Instruments(
        provider=provider,
        saga_duration=meter.create_histogram(
            names.METRIC_SAGA_DURATION,
            unit="s",
            description="Time from submission to a final state",
            explicit_bucket_boundaries_advisory=_SAGA_BUCKETS,
        ),
        approval_wait=meter.create_histogram(
            names.METRIC_APPROVAL_WAIT,
            unit="s",
            description="Time from ready-for-review to approval",
            explicit_bucket_boundaries_advisory=_HUMAN_BUCKETS,
        ),
        outbox_lag=meter.create_histogram(
            names.METRIC_OUTBOX_LAG,
            unit="s",
            description="Time from an outbox row's creation to its publish",
            explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
        ),
        destination_duration=meter.create_histogram(
            names.METRIC_DESTINATION_DURATION,
            unit="s",
            description="Duration of destination calls",
            explicit_bucket_boundaries_advisory=_FAST_BUCKETS,
        ),
        destination_waits=meter.create_counter(
            names.METRIC_DESTINATION_WAITS,
            unit="{publish}",
            description="Publishes parked because their destination was at its concurrency limit",
        ),
        effect_unknown=meter.create_counter(
            names.METRIC_EFFECT_UNKNOWN,
            unit="{step}",
            description="Steps whose side effect may or may not have happened",
        ),
        compensation_failed=meter.create_counter(
            names.METRIC_COMPENSATION_FAILED,
            unit="{step}",
            description="Steps whose undo failed or may have happened: a person decides",
        ),
        dead_letters=meter.create_counter(
            names.METRIC_DEAD_LETTERS,
            unit="{message}",
            description="Messages set aside: unparseable, or failed in a way no retry fixes",
        ),
        pruned=meter.create_counter(
            names.METRIC_PRUNED, unit="{row}", description="Rows removed by retention"
        ),
    )


__all__ = [
    "SagaStateSource",
    "current_meter_provider",
    "OverdueSource",
    "record_approval_wait",
    "record_dead_letter",
    "record_pruned",
    "set_overdue_reviews_counter",
    "record_destination_latency",
    "record_destination_wait",
    "record_compensation_failed",
    "record_effect_unknown",
    "record_outbox_lag",
    "record_saga_finished",
    "set_saga_state_counter",
    "use_meter_provider",
]
