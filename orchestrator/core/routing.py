"""Task names and their queues (`pressroom.<role>.<action>`). No I/O."""

from __future__ import annotations

QUEUES = ("researcher", "writer", "reviewer", "publisher")

RESEARCH = "pressroom.researcher.research"
DRAFT = "pressroom.writer.draft"
REVIEW = "pressroom.reviewer.review"
PUBLISH = "pressroom.publisher.publish"

TASKS: dict[str, str] = {RESEARCH: "researcher", DRAFT: "writer", REVIEW: "reviewer", PUBLISH: "publisher"}


def queue_of(task: str) -> str:
    """The queue a task name routes to: its second dotted part."""
    parts = task.split(".")
    if len(parts) != 3 or parts[0] != "pressroom" or parts[1] not in QUEUES:
        raise ValueError(f"not a pressroom task name: {task!r}")
    return parts[1]


__all__ = ["DRAFT", "PUBLISH", "QUEUES", "RESEARCH", "REVIEW", "TASKS", "queue_of"]
