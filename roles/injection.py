"""Spotting source text that reads as instructions to an agent (DESIGN invariant 6).

Tool output is data. A passage that talks to the assistant, tries to change
where or whether something is published, asks for tools or capabilities, or
carries a URL or destination URI that the brief does not mention, is marked
suspicious and is never quoted. `assess()` says why, as reasons of the form
``"rule-name: matched text"``; `rule_of()` reads the rule name back.

The rules are one readable table of named regular expressions. They look for
requests aimed at an agent, not for topics, so ordinary prose ("the council
approved the budget", "the library published a newsletter") is not flagged.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Final

FOREIGN_URL: Final = "foreign-url"
HIDDEN_CHARACTERS: Final = "hidden-characters"


@dataclass(frozen=True)
class Rule:
    """One named pattern; `taints_source` marks rules that make the whole file untrusted."""

    name: str
    pattern: re.Pattern[str]
    taints_source: bool = True


def _rule(name: str, pattern: str, *, taints_source: bool = True) -> Rule:
    return Rule(name, re.compile(pattern, re.IGNORECASE | re.VERBOSE), taints_source)


_AGENT = r"(?:ai|a\.i\.|assistant|llm|chatbot|language\s+model|(?:ai\s+)?agent)s?"
_OLD = r"(?:previous|prior|earlier|above|preceding|original|system|initial)"

RULES: Final[tuple[Rule, ...]] = (
    _rule(
        "ignore-instructions",
        rf"""\b(?:ignore|forget|disregard|override|bypass)\s+(?:all\s+|any\s+)?(?:of\s+)?
            (?:your|my|these|those|all|{_OLD}|the\s+{_OLD})\s+(?:\w+\s+)?
            (?:instructions?|rules|guidelines|directions|directives|prompts?|guardrails?)\b""",
    ),
    _rule(
        "disregard-above",
        r"""\bdisregard\s+(?:all|any|everything)\b
            |\b(?:disregard|ignore|forget)\s+(?:everything\s+|all\s+)?(?:the\s+)?(?:above|preceding)\b""",
    ),
    _rule(
        "role-reassignment",
        r"""\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b|\bpretend\s+(?:to\s+be|you\s+are)\b
            |\bact\s+as\s+(?:an?\s+|the\s+)?(?:ai|assistant|chatbot|llm|system|administrator|admin|developer)\b
            |\bnew\s+instructions\s*:""",
    ),
    _rule("as-an-ai", r"\bas\s+an?\s+(?:ai|a\.i\.|language\s+model|llm|chatbot|ai\s+assistant)\b"),
    _rule(
        "system-prompt",
        r"""\bsystem\s+prompt\b|\bsystem\s+message\b|\bdeveloper\s+(?:message|mode)\b|\bjailbreak
            |<\|?\s*(?:system|im_start|assistant)\b|\[\s*(?:system|inst)\s*\]""",
    ),
    _rule(
        "addressed-to-agent",
        rf"""\b(?:note|attention|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?{_AGENT}\b
            |\b(?:dear|hey|hello|hi)\s+{_AGENT}\b
            |\b{_AGENT}\s+(?:reading|processing|summari[sz]ing|parsing)\s+this\b""",
    ),
    _rule(
        "publish-to",
        r"""\b(?:publish|post|send|upload|push|deploy|forward|submit|exfiltrate)\s+
            (?:(?:this|it|that|these|them|all|everything|the|your|our)\s+)?(?:\w+\s+){0,2}?
            (?:to|at|on)\s+(?:(?:the|this|our|my|a)\s+)?
            (?:webhook|endpoint|url\b|site:|git:|https?:)""",
    ),
    _rule(
        "approval-change",
        r"""\bauto-?approv\w*
            |\bapprove\s+(?:it|this|that|them|(?:the|this)\s+\w+)\s+
             (?:automatically|immediately|now|right\s+away|without)\b
            |\b(?:skip|bypass|override|circumvent)\s+(?:the\s+|any\s+|all\s+)?
             (?:human\s+)?(?:review|approval|reviewer|approver)s?\b
            |\bmark\s+(?:it|this|the\s+\w+)\s+as\s+(?:approved|reviewed|passed)\b""",
    ),
    _rule(
        "tool-call",
        r"""\b(?:call|invoke|use|trigger)\s+(?:the\s+|a\s+|your\s+)?\w*[_-]?(?:tool|function)\s*(?:call|named|\(|`|:)
            |\b(?:call|invoke)\s+the\s+\w+\s+(?:tool|function)\b
            |\b(?:tool|function)[_\s]call\b
            |\b(?:run|execute)\s+(?:the\s+following|this)\s+(?:shell\s+)?(?:command|script|code)\b""",
    ),
    _rule(
        "capability-change",
        r"""\b(?:grant|give|expand|widen|extend|escalate|elevate|unlock|enable|add)\w*\s+(?:to\s+)?
            (?:yourself|(?:the|this)\s+(?:ai|assistant|agent|model|llm|bot)(?:'s)?)\s+(?:\w+\s+){0,2}?
            (?:capabilit\w*|permissions?|privileges?|access|tools?|rights)\b
            |\b(?:sudo|superuser|root\s+(?:access|privileges?))\b
            |\bcapabilit(?:y|ies)\s+(?:set|token|grant|list)\b""",
    ),
    _rule(
        HIDDEN_CHARACTERS,
        r"[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069]",
        taints_source=False,
    ),
)

_URL = re.compile(
    r"""(?:\b(?:webhook|git|site):\S+|\b(?:https?|ftp)://\S+|\bwww\.[a-z0-9-]+\.[a-z]{2,}\S*)""",
    re.IGNORECASE,
)
# Changes whenever a rule or the URL pattern changes: an index built with other rules is rebuilt.
RULES_VERSION: Final = hashlib.sha256(
    "\n".join([*(f"{r.name}={r.pattern.pattern}={r.taints_source}" for r in RULES), _URL.pattern]).encode()
).hexdigest()[:16]
_URL_TAIL = ".,;:!?)]}>\"'\u201d\u2019*_`"
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
_SNIPPET = 80


def assess(text: str, brief: str = "") -> list[str]:
    """Reasons `text` reads as instructions to an agent; empty when it reads as data.

    URLs and destination URIs are reasons unless they also occur in `brief`.
    """
    reasons, urls = assess_parts(text)
    return reasons + url_reasons(urls, brief)


def assess_parts(text: str) -> tuple[list[str], list[str]]:
    """The brief-independent half of `assess()`: rule reasons, and every URL in `text`.

    ``assess(t, b) == reasons + url_reasons(urls, b)``, so an index can store
    these once per passage and finish the assessment for each brief.
    """
    reasons: list[str] = []
    plain = _plain(text)
    for rule in RULES:
        haystack = text if rule.name == HIDDEN_CHARACTERS else plain
        found = rule.pattern.search(haystack)
        if found:
            reasons.append(f"{rule.name}: {_snippet(found.group())}")
    return reasons, foreign_urls(text)


def url_reasons(urls: list[str] | tuple[str, ...], brief: str = "") -> list[str]:
    """`foreign-url` reasons for the URLs (from `assess_parts`) that `brief` does not mention."""
    allowed = _plain(brief)
    return [f"{FOREIGN_URL}: {_snippet(url)}" for url in urls if url not in allowed]


def foreign_urls(text: str, brief: str = "") -> list[str]:
    """URLs and destination URIs in `text` that do not occur in `brief`, in order, once each."""
    allowed = _plain(brief)
    found: list[str] = []
    for m in _URL.finditer(_plain(text)):
        url = m.group().rstrip(_URL_TAIL)
        if url and url not in allowed and url not in found:
            found.append(url)
    return found


def rule_of(reason: str) -> str:
    """The rule name a reason from `assess()` starts with."""
    return reason.split(":", 1)[0]


def taints_source(reasons: list[str] | tuple[str, ...]) -> bool:
    """Whether these reasons make the whole source untrusted, not only the passage.

    Text that tries to instruct the agent compromises its file; a bare foreign
    URL or an invisible character only disqualifies its own passage.
    """
    tainting = {rule.name for rule in RULES if rule.taints_source}
    return any(rule_of(reason) in tainting for reason in reasons)


def _plain(text: str) -> str:
    """Fold compatibility forms and drop zero-width characters, so spacing tricks do not hide words."""
    return unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH)


def _snippet(matched: str) -> str:
    """The matched text on one line, invisible characters spelled as code points."""
    shown = "".join(
        f"U+{ord(c):04X}" if unicodedata.category(c) in ("Cf", "Cc") and not c.isspace() else c
        for c in matched
    )
    flat = " ".join(shown.split())
    return flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 3] + "..."
