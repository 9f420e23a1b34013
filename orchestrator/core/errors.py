"""The one error tree of Pressroom, and the table that maps it to exit codes.

::

    PressroomError
    ├── InvalidInput            exit 2: the request itself is malformed
    ├── NotFound                exit 3: a saga, version or destination does not exist
    ├── Refused                 exit 4: well-formed, but not allowed now
    │   ├── IllegalTransition   the saga machine refuses the move
    │   ├── StaleVersion        the version is not the head, or was edited
    │   ├── ApprovalRefused     wrong binding, expired, used, or self-approval
    │   │   └── ApproverLapsed  the approver was revoked or lost reviewer before the effect
    │   ├── PolicyRefused       capability or risk class says no
    │   ├── NotAuthenticated    closed mode: no token, or an unknown or revoked one (HTTP 401)
    │   ├── NotPermitted        the caller's roles lack the permission (HTTP 403)
    │   │   └── SelfApproval    the submitter or an author tries to approve (also ApprovalRefused)
    │   └── IdempotencyConflict same business key, different arguments
    │       └── KeyInFlight     same key, another call holds it right now
    ├── ServiceUnavailable      exit 5: the database or the broker cannot be reached
    ├── (entrypoints.outcome.WorkEnded  exit 6: the command was carried out; the work it drove ended badly)
    ├── ApprovalRequired        an outcome, not a failure: a person must approve
    ├── EffectUnknown           an outcome: a side effect may have happened
    ├── RetryLater              not now: the work's lease brings it back
    │   ├── Parked              not now: the lease is given back, the work sent again when its destination frees
    │   └── LeaseFirst          not inside this transaction: take the lease on its own first (a model call)
    └── DestinationError        raised by destination adapters
        ├── NotApplied          definite: the destination did not apply it
        └── MaybeApplied        uncertain: it may have been applied

Errors carry ids as attributes and pickle cleanly (they cross Celery).
No I/O here.
"""

from __future__ import annotations

from typing import Any


class PressroomError(Exception):
    """Root of every error Pressroom raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, **attrs: Any) -> None:
        super().__init__(message)
        self.message = message
        for name, value in attrs.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        attrs = {k: v for k, v in self.__dict__.items() if k != "message"}
        return (_rebuild, (type(self), self.message, attrs))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[PressroomError], message: str, attrs: dict[str, Any]) -> PressroomError:
    return cls(message, **attrs)


class InvalidInput(PressroomError):
    exit_code = 2


class NotFound(PressroomError):
    exit_code = 3


class Refused(PressroomError):
    exit_code = 4


class IllegalTransition(Refused):
    pass


class StaleVersion(Refused):
    pass


class ApprovalRefused(Refused):
    pass


class PolicyRefused(Refused):
    pass


class IdempotencyConflict(Refused):
    pass


class KeyInFlight(IdempotencyConflict):
    """Another call holds the business key right now: ask again after its claim runs out."""


class ServiceUnavailable(PressroomError):
    """A service (database, broker) could not be reached; the command may be retried."""

    exit_code = 5


class NotAuthenticated(Refused):
    pass


class NotPermitted(Refused):
    pass


class SelfApproval(NotPermitted, ApprovalRefused):
    pass


class ApproverLapsed(ApprovalRefused):
    """At the moment of the effect the approver is no longer an active reviewer."""


class ApprovalRequired(PressroomError):
    exit_code = 4


class EffectUnknown(PressroomError):
    exit_code = 0


class RetryLater(PressroomError):
    """Work that cannot go on yet (another call holds its key): leave it to its lease."""

    exit_code = 0


class Parked(RetryLater):
    """Work waiting for a turn at one of `destinations` (each at its concurrency limit in
    this process): the consumer gives its lease back, uncounted, and sends it again when a
    call to one of them ends; the sweeper does, if this process dies first.

    Raised as `Parked(message, saga_id=..., destinations=(...))`."""

    destinations: tuple[str, ...] = ()


class LeaseFirst(RetryLater):
    """Work about to call a model inside the transaction that holds its work row: the
    consumer rolls that back and runs the work again with its lease committed first."""


class DestinationError(PressroomError):
    """A destination call went wrong; `definite` says whether it surely did not apply."""

    definite = True


class NotApplied(DestinationError):
    definite = True


class MaybeApplied(DestinationError):
    definite = False


EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_UNAVAILABLE = 5
# The command was carried out, but the work it drove inline ended `failed` or `effect-unknown`.
EXIT_WORK_ENDED = 6


def exit_code_for(error: BaseException) -> int:
    """The one place an exception becomes a process exit code."""
    if isinstance(error, PressroomError):
        return error.exit_code
    return 1


__all__ = [
    "ApprovalRefused",
    "ApprovalRequired",
    "ApproverLapsed",
    "DestinationError",
    "EffectUnknown",
    "IdempotencyConflict",
    "KeyInFlight",
    "LeaseFirst",
    "IllegalTransition",
    "InvalidInput",
    "MaybeApplied",
    "NotApplied",
    "NotAuthenticated",
    "NotFound",
    "NotPermitted",
    "Parked",
    "PolicyRefused",
    "PressroomError",
    "Refused",
    "RetryLater",
    "ServiceUnavailable",
    "SelfApproval",
    "StaleVersion",
    "exit_code_for",
    "EXIT_UNAVAILABLE",
    "EXIT_WORK_ENDED",
]
