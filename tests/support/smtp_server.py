"""A real local SMTP server (aiosmtpd) on a free port of 127.0.0.1 that keeps what it receives."""

from __future__ import annotations

import asyncio
import email
import email.policy
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from types import TracebackType
from typing import Any

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Received:
    """One message as the server accepted it, with what the test's probe saw at that moment."""

    sender: str
    recipients: list[str]
    message: EmailMessage
    at: float
    seen: Any = None


@dataclass
class _Handler:
    # Called when a message's data arrives, before the server answers; its result is kept.
    probe: Callable[[], Any] | None = None
    # The answer to a message's data, and how long to wait before giving it.
    reply: str = "250 Message accepted for delivery"
    stall_seconds: float = 0.0
    messages: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        # SMTP carries CRLF line ends; the message is read back with the local ones.
        raw = envelope.content.replace(b"\r\n", b"\n")
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        seen = self.probe() if self.probe is not None else None
        with self.lock:
            self.messages.append(
                Received(envelope.mail_from, list(envelope.rcpt_tos), parsed, time.monotonic(), seen)
            )
        if self.stall_seconds:
            await asyncio.sleep(self.stall_seconds)
        return self.reply


class SmtpServer:
    """`with SmtpServer() as smtp:` a server at `smtp.url`; `smtp.messages` what it accepted."""

    def __init__(
        self,
        probe: Callable[[], Any] | None = None,
        *,
        reply: str = "250 Message accepted for delivery",
        stall_seconds: float = 0.0,
    ) -> None:
        self.port = free_port()
        self.handler = _Handler(probe, reply, stall_seconds)
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def messages(self) -> list[Received]:
        with self.handler.lock:
            return list(self.handler.messages)

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.controller.stop()
