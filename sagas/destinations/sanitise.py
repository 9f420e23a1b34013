"""The last line before a page is written: the rendered HTML through the nh3 sanitiser.

The markdown renderer already escapes raw HTML, and a version with a link or
image outside `PRESSROOM_LINK_HOSTS` is refused before any destination is
called. Whatever still reaches a page passes nh3 (the Rust `ammonia`
sanitiser) with only the tags CommonMark produces (and the `sup` of a citation marker), only ``http``/``https``
(and relative) targets, and every ``href``/``src`` the link policy does not
allow removed, so a page never loads or links to a foreign host.
"""

from __future__ import annotations

from typing import Final

import nh3

from orchestrator.harness.links import LinkPolicy

TAGS: Final = frozenset("p h1 h2 h3 h4 h5 h6 a img em strong code pre blockquote ul ol li hr br sup".split())
ATTRIBUTES: Final = {
    "a": {"href", "title", "id", "class"},  # ids and classes: the citation anchors
    "sup": {"class"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "code": {"class"},
}


def sanitise_html(fragment: str, policy: LinkPolicy) -> str:
    """`fragment` with only CommonMark's tags and no target outside `policy`."""

    def allowed(tag: str, attribute: str, value: str) -> str | None:
        if attribute in ("href", "src") and not policy.allows(value):
            return None
        return value

    return nh3.clean(
        fragment,
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes={"http", "https"},
        attribute_filter=allowed,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


__all__ = ["sanitise_html"]
