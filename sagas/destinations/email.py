"""`email:ADDR[,ADDR...]`: the approved version mailed to a few recipients. Irreversible.

- URI: `email:` and one to `MAX_RECIPIENTS` bare addresses, commas apart
  (`local@domain`: no display name, no angle brackets, no CR, LF or other
  control character). Stored lower-cased in the domain, in the order given.
- Settings: `PRESSROOM_SMTP_URL` (`smtp://HOST:PORT`, upgraded with STARTTLS when
  the server offers it, or `smtps://` for implicit TLS; `user:password@` logs in,
  and only over an encrypted connection), `PRESSROOM_SMTP_FROM` (the From address) and
  `PRESSROOM_EMAIL_DOMAINS` (the recipient domains allowed, commas apart; unset
  or empty: every `email:` destination is refused). The domains are checked at
  submit and again before each send.
- Publish: one message (`smtplib`, `email.message.EmailMessage`): the subject is
  the version's title, the plain-text body its markdown, `Message-ID` derived
  from the idempotency key (a resend is recognisable as the same message) and
  `X-Pressroom-Key` the key itself. The receipt names the Message-ID, the
  recipients and the server's answer.
- Status: SMTP cannot be asked whether a message arrived: the answer is always
  `unknown`, so a publish whose outcome was lost is left for a person.
- Compensation: a message cannot be unsent. Compensating sends a correction to
  the same recipients (`Correction: <title>`, `In-Reply-To` and `References` the
  original Message-ID, its own Message-ID from the undo's key) saying the
  earlier message is withdrawn; its receipt says `"kind": "correction"`.

Outcomes of a send, by what is known about the message::

    no server set, domain not allowed             NotApplied (nothing sent)
    connect refused or timed out, TLS, login      NotApplied
    a password but no TLS to send it over         NotApplied
    sender or a recipient refused (before DATA)   NotApplied
    the server refused the message (4xx/5xx)      NotApplied
    accepted (250 after the message)              applied
    dropped or timed out once DATA was sent       MaybeApplied

One connection per call, closed before returning; no retries (a retry is the
saga's decision, under the same key).
"""

from __future__ import annotations

import hashlib
import smtplib
import ssl
from dataclasses import dataclass
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote, urlsplit

from orchestrator.core.errors import InvalidInput, MaybeApplied, NotApplied
from sagas.destinations.base import OpenOptions, PublishedVersion, StatusAnswer
from sagas.destinations.slugs import check_key

if TYPE_CHECKING:
    from orchestrator.core.config import Settings

MAX_RECIPIENTS = 10
KEY_HEADER = "X-Pressroom-Key"
DEFAULT_PORTS = {"smtp": 25, "smtps": 465}


def recipients_of(target: str) -> tuple[str, ...]:
    """The addresses of an `email:` target, checked; `InvalidInput` naming the first bad one."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in target):
        raise InvalidInput(
            f"email:{target!r}: a control character (CR, LF, …) in the recipients", target=target
        )
    parts = [part.strip() for part in target.split(",")]
    if len(parts) > MAX_RECIPIENTS:
        raise InvalidInput(f"email: at most {MAX_RECIPIENTS} recipients, got {len(parts)}", target=target)
    found: list[str] = []
    for part in parts:
        address = _address(part, target)
        if address in found:
            raise InvalidInput(f"email: {address} is named twice", target=target)
        found.append(address)
    return tuple(found)


def _address(text: str, target: str) -> str:
    if not text or any(ch in text for ch in '<>"() \t'):
        raise InvalidInput(
            f"email: {text!r} is not a bare address (write local@domain, no display name)", target=target
        )
    try:
        parsed = Address(addr_spec=text)
    except (HeaderParseError, ValueError, IndexError) as exc:
        raise InvalidInput(f"email: {text!r} is not an address: {exc}", target=target) from None
    if not parsed.username or not parsed.domain or "." not in parsed.domain.strip("."):
        raise InvalidInput(
            f"email: {text!r} needs a local part and a domain, as in local@example.org", target=target
        )
    return f"{parsed.username}@{parsed.domain.lower()}"


def allowed_domains(value: str | None) -> frozenset[str]:
    """`PRESSROOM_EMAIL_DOMAINS` as lower-case domains (commas or spaces apart)."""
    return frozenset(
        d.strip().lower().rstrip(".") for d in (value or "").replace(",", " ").split() if d.strip()
    )


def domain_refusal(recipients: tuple[str, ...], domains: frozenset[str]) -> str | None:
    """Why these recipients may not be mailed, or None."""
    if not domains:
        return "email destinations are off: PRESSROOM_EMAIL_DOMAINS names no recipient domain"
    for address in recipients:
        domain = address.rsplit("@", 1)[1]
        if domain not in domains:
            return f"{domain} is not in PRESSROOM_EMAIL_DOMAINS"
    return None


def message_id(key: str, sender: str) -> str:
    """The Message-ID of the message sent under `key` (the same for every resend)."""
    domain = sender.rsplit("@", 1)[1] if "@" in sender else "pressroom.invalid"
    return f"<pressroom.{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


@dataclass(frozen=True)
class Server:
    """Where and how to send: from `PRESSROOM_SMTP_URL`."""

    host: str
    port: int
    implicit_tls: bool
    user: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> Server:
        """`smtp://[user:password@]HOST[:PORT]` or `smtps://…`; `ValueError` naming what is wrong."""
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError("PRESSROOM_SMTP_URL must be smtp://HOST[:PORT] or smtps://HOST[:PORT]")
        return cls(
            host=parts.hostname,
            port=parts.port or DEFAULT_PORTS[parts.scheme],
            implicit_tls=parts.scheme == "smtps",
            user=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )


class EmailDestination:
    """A `Destination` mailing one version to a few recipients; its undo is a correction."""

    form: ClassVar[str] = "email:ADDR[,ADDR...]"
    file_based: ClassVar[bool] = False
    reversible: ClassVar[bool] = False
    test_only: ClassVar[bool] = False

    def __init__(
        self,
        recipients: tuple[str, ...],
        *,
        uri: str,
        timeout: float = 10.0,
        smtp_url: str | None = None,
        sender: str | None = None,
        domains: frozenset[str] = frozenset(),
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.recipients = recipients
        self.uri = uri
        self.timeout = timeout
        self.smtp_url = smtp_url
        self.sender = sender
        self.domains = domains
        self.tls = tls  # None: the system's certificate authorities

    @classmethod
    def check_target(cls, target: str) -> None:
        recipients_of(target)

    @classmethod
    def canonical(cls, target: str) -> str:
        return ",".join(recipients_of(target))

    @classmethod
    def check_at_submit(cls, target: str, settings: Settings) -> None:
        """The recipients' domains must be allowed, and a server and a sender set."""
        why = domain_refusal(recipients_of(target), allowed_domains(settings.email_domains))
        if why is None and (settings.smtp_url is None or not settings.smtp_from):
            why = "set PRESSROOM_SMTP_URL and PRESSROOM_SMTP_FROM to send email"
        if why is None:
            try:
                Server.parse(settings.smtp_url.get_secret_value() if settings.smtp_url else "")
            except ValueError as exc:
                why = str(exc)
        if why is not None:
            raise InvalidInput(f"email:{target}: {why}", target=target)

    @classmethod
    def open(cls, target: str, *, uri: str, timeout: float, options: OpenOptions) -> EmailDestination:
        settings = options.settings
        return cls(
            recipients_of(target),
            uri=uri,
            timeout=timeout,
            smtp_url=settings.smtp_url.get_secret_value() if settings and settings.smtp_url else None,
            sender=settings.smtp_from if settings else None,
            domains=allowed_domains(settings.email_domains if settings else None),
        )

    # -- the port -----------------------------------------------------------

    def publish(self, key: str, version: PublishedVersion) -> dict[str, Any]:
        check_key(key)
        sender = self._sender(key)
        msg = self._message(sender, version.title, version.markdown, message_id(key, sender), key)
        reply = self._send(key, msg)
        return {
            "kind": "email",
            "message_id": msg["Message-ID"],
            "recipients": list(self.recipients),
            "subject": version.title,
            "smtp_reply": reply,
        }

    def status(self, key: str) -> StatusAnswer:
        check_key(key)
        return StatusAnswer(
            kind="unknown", detail="SMTP cannot be asked whether a message was delivered; a person decides"
        )

    def compensate(self, key: str, receipt: dict[str, Any]) -> dict[str, Any]:
        """Send a correction (a message cannot be unsent); the correction's receipt."""
        check_key(key)
        sender = self._sender(key)
        original = str(receipt.get("message_id") or message_id(key, sender))
        title = str(receipt.get("subject") or receipt.get("title") or "an earlier message")
        body = (
            f"The message {title!r} sent earlier ({original}) is withdrawn. Please disregard it.\n"
            "This correction does not unsend it.\n"
        )
        undo_key = "undo-" + key
        msg = self._message(sender, f"Correction: {title}", body, message_id(undo_key, sender), undo_key)
        msg["In-Reply-To"] = original
        msg["References"] = original
        reply = self._send(key, msg)
        return {
            "kind": "correction",
            "message_id": msg["Message-ID"],
            "in_reply_to": original,
            "recipients": list(self.recipients),
            "smtp_reply": reply,
            "note": "a correction was sent; the original message was not unsent",
        }

    # -- SMTP -----------------------------------------------------------------

    def _sender(self, key: str) -> str:
        why = domain_refusal(self.recipients, self.domains)
        if why is None and (not self.smtp_url or not self.sender):
            why = "PRESSROOM_SMTP_URL and PRESSROOM_SMTP_FROM must be set"
        if why is not None:
            raise NotApplied(f"{self.uri}: {why}; nothing was sent", uri=self.uri, key=key)
        assert self.sender is not None
        return self.sender

    def _message(self, sender: str, subject: str, body: str, msg_id: str, key: str) -> EmailMessage:
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = ", ".join(self.recipients)
        msg["Subject"] = " ".join(subject.split())  # one line, whatever the title holds
        msg["Message-ID"] = msg_id
        msg[KEY_HEADER] = key
        msg.set_content(body)
        return msg

    def _send(self, key: str, msg: EmailMessage) -> str:
        """Send `msg`; the server's final answer. `NotApplied` until DATA is under way, then `MaybeApplied`."""
        assert self.smtp_url is not None and self.sender is not None
        try:
            server = Server.parse(self.smtp_url)
        except ValueError as exc:
            raise NotApplied(f"{self.uri}: {exc}; nothing was sent", uri=self.uri, key=key) from None
        data_sent = False
        smtp: smtplib.SMTP | None = None
        try:
            smtp = self._connect(server)
            smtp.ehlo_or_helo_if_needed()
            encrypted = server.implicit_tls
            if not encrypted and smtp.has_extn("starttls"):
                smtp.starttls(context=self.tls or ssl.create_default_context())
                smtp.ehlo()
                encrypted = True
            if server.user:
                if not encrypted:
                    raise NotApplied(
                        f"{self.uri}: the server offers no STARTTLS, and a password is never sent in clear"
                        " (use smtps:// or a server with STARTTLS); nothing was sent",
                        uri=self.uri,
                        key=key,
                    )
                smtp.login(server.user, server.password or "")
            code, answer = smtp.mail(self.sender)
            if code != 250:
                raise smtplib.SMTPSenderRefused(code, answer, self.sender)
            for address in self.recipients:
                code, answer = smtp.rcpt(address)
                if code not in (250, 251):
                    raise smtplib.SMTPRecipientsRefused({address: (code, answer)})
            data_sent = True
            # CRLF line ends, as SMTP wants them (smtplib leaves bytes as they are).
            code, answer = smtp.data(msg.as_bytes(policy=SMTP_POLICY))  # raises if DATA is refused
            if code != 250:  # the message itself was refused: the server did not take it
                raise smtplib.SMTPDataError(code, answer)
            return f"{code} {_text(answer)}"
        except smtplib.SMTPResponseException as exc:  # the server answered no: nothing was accepted
            detail = f"{self.uri}: the server refused: {exc.smtp_code} {_text(exc.smtp_error)}"
            raise NotApplied(detail, uri=self.uri, key=key) from None
        except (smtplib.SMTPException, OSError) as exc:
            detail = f"{self.uri}: {type(exc).__name__}: {exc}"
            if data_sent:
                raise MaybeApplied(
                    f"{detail} (after DATA: may have been delivered)", uri=self.uri, key=key
                ) from None
            raise NotApplied(f"{detail} (before DATA: nothing was sent)", uri=self.uri, key=key) from None
        finally:
            if smtp is not None:
                _close(smtp)

    def _connect(self, server: Server) -> smtplib.SMTP:
        if server.implicit_tls:
            context = self.tls or ssl.create_default_context()
            return smtplib.SMTP_SSL(server.host, server.port, timeout=self.timeout, context=context)
        return smtplib.SMTP(server.host, server.port, timeout=self.timeout)


def _close(smtp: smtplib.SMTP) -> None:
    """QUIT and close; the message's outcome is already known, so a failure here changes nothing."""
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


__all__ = [
    "KEY_HEADER",
    "MAX_RECIPIENTS",
    "EmailDestination",
    "Server",
    "allowed_domains",
    "domain_refusal",
    "message_id",
    "recipients_of",
]
