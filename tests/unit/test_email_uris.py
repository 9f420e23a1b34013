"""`email:` URIs, their settings rules and what the registry says of each kind: no services."""

from __future__ import annotations

import pytest

from orchestrator.core.config import Settings
from orchestrator.core.errors import InvalidInput
from sagas.destinations.email import (
    MAX_RECIPIENTS,
    EmailDestination,
    Server,
    allowed_domains,
    domain_refusal,
    message_id,
)
from sagas.destinations.registry import (
    check_at_submit,
    is_file_based,
    is_reversible,
    normalise_destination,
    open_destination,
    parse_destination,
)


def test_recipients_are_stored_in_one_spelling() -> None:
    assert normalise_destination("email: Ann@Example.ORG , bo@example.org") == (
        "email:Ann@example.org,bo@example.org"
    )


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("email:a@x.org\r\nBcc: evil@y.org", "control character"),
        ("email:a@x.org\nBcc: evil@y.org", "control character"),
        ("email:a@x.org\x00", "control character"),
        ("email:nobody", "not an address"),
        ("email:@x.org", "not an address"),
        ("email:Ann <a@x.org>", "no display name"),
        ('email:"Ann" a@x.org', "no display name"),
        ("email:a@x.org,a@x.org", "named twice"),
        ("email:" + ",".join(f"p{i}@x.org" for i in range(MAX_RECIPIENTS + 1)), "at most"),
        ("email:a@localhost", "needs a local part and a domain"),
    ],
)
def test_bad_recipients_are_refused_in_one_line(uri: str, why: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        normalise_destination(uri)
    assert why in str(caught.value)
    assert "\n" not in str(caught.value).replace("\\n", "")
    assert caught.value.exit_code == 2


def test_the_adapter_itself_refuses_header_injection() -> None:
    with pytest.raises(InvalidInput, match="a control character"):
        parse_destination("email:a@x.org\r\nBcc: evil@y.org")


def test_what_the_registry_says_of_each_kind(tmp_path: object) -> None:
    assert is_file_based("site:/x") and is_file_based("git:/x")
    assert not is_file_based("webhook:https://example.org/h") and not is_file_based("email:a@x.org")
    assert all(is_reversible(u) for u in ("site:/x", "git:/x", "webhook:https://e.org/h", "memory:m"))
    assert not is_reversible("email:a@x.org")


def _settings(**values: object) -> Settings:
    base: dict[str, object] = {"secret": "s", "smtp_url": "smtp://127.0.0.1:2525", "smtp_from": "p@news.org"}
    base.update(values)
    return Settings(**base)  # type: ignore[arg-type]


def test_the_operator_allows_each_recipient_domain() -> None:
    check_at_submit("email:a@x.org,b@y.org", _settings(email_domains="x.org, y.org"))
    with pytest.raises(InvalidInput, match="PRESSROOM_EMAIL_DOMAINS names no recipient domain"):
        check_at_submit("email:a@x.org", _settings())
    with pytest.raises(InvalidInput, match="y.org is not in PRESSROOM_EMAIL_DOMAINS"):
        check_at_submit("email:a@x.org,b@y.org", _settings(email_domains="x.org"))
    with pytest.raises(InvalidInput, match="PRESSROOM_SMTP_URL"):
        check_at_submit("email:a@x.org", _settings(email_domains="x.org", smtp_url=None))
    with pytest.raises(InvalidInput, match="smtp://HOST"):
        check_at_submit("email:a@x.org", _settings(email_domains="x.org", smtp_url="http://mail"))


def test_domain_rules_are_exact() -> None:
    domains = allowed_domains("X.org. ,y.org")
    assert domains == frozenset({"x.org", "y.org"})
    assert domain_refusal(("a@x.org",), domains) is None
    assert domain_refusal(("a@sub.x.org",), domains) == "sub.x.org is not in PRESSROOM_EMAIL_DOMAINS"


def test_the_smtp_url_names_server_tls_and_login() -> None:
    assert Server.parse("smtp://127.0.0.1:2525") == Server("127.0.0.1", 2525, False)
    assert Server.parse("smtps://u%40x:p%3Aw@mail.example.org") == Server(
        "mail.example.org", 465, True, "u@x", "p:w"
    )
    with pytest.raises(ValueError, match="smtp://"):
        Server.parse("mail.example.org:25")


def test_message_ids_follow_the_key() -> None:
    assert message_id("k1", "p@news.org") == message_id("k1", "p@news.org")
    assert message_id("k1", "p@news.org") != message_id("k2", "p@news.org")
    assert message_id("k1", "p@news.org").endswith("@news.org>")


def test_opening_reads_the_settings_and_sends_nothing() -> None:
    dest = open_destination(
        "email:a@x.org", timeout=1, settings=_settings(email_domains="x.org", smtp_url="smtp://127.0.0.1:1")
    )
    assert isinstance(dest, EmailDestination)
    assert dest.recipients == ("a@x.org",) and dest.domains == frozenset({"x.org"})
    assert dest.status("k").kind == "unknown", "SMTP cannot be asked"
