"""The pre-call gate's policy (issue 49): which calls act, which of their arguments say where
the call goes (destinations) or what it carries (payloads), which sources each may take its
values from, and which tools the deployment trusts. Provenance decides, wording only informs.

A value in a call comes from one of these sources (the worker's `taint` list says which value
came from which tool result, the agent side knows the user's task):

- `user`: the task, the user's own messages and replies, a source the user told the agent to
  follow (`core.sanction`): such a value is in no taint entry, so it is always allowed;
- `trusted`: the output of a tool the policy trusts (`trusted_tools`);
- `lookup`: the output of an untrusted tool, in a run whose user asked for an action (send,
  pay, invite, create, ...: `asks_action`) that needs a destination of the value's kind (a
  payment an account, an invitation an address: `asked_kinds`), with no instructions
  addressed to the agent near it: the agent looked up what the user's request left open (a
  contact's address, last month's payee);
- `data`: the output of an untrusted tool in a run whose user asked for no action ("how many
  appointments do I have?"), or for none that needs a destination of that kind (an account
  in a run that asked to e-mail a summary): no acting call of the run needs it from data;
- `instructed`: the output of an untrusted tool that held instructions addressed to the agent
  near the value.

Defaults (no file): destinations may come from `user`, `trusted` and `lookup`; payloads from
those and `data`. So a destination planted in data is refused in a run whose user asked for no
action, however it was worded, and a value from instructions anywhere in an acting call. Strict
mode narrows both to `user` and `trusted`. Read-only calls are never refused for a value of
`lookup` or `data`.

The file (TOML or JSON, by its suffix; `RB_CLIENT_GATE_POLICY`, or `gate_policy=` on a client):

    trusted_tools = ["search_contacts_by_name"]   # their output counts as the user's
    acting_tools = ["run_sql"]                    # act whatever their name says
    read_tools = ["preview_payment"]              # never act (never refused)
    destination_args = ["beneficiary_ref"]        # say where a call goes (besides the defaults)
    destination_sources = ["user", "trusted", "lookup"]
    payload_sources = ["user", "trusted", "lookup", "data"]

    [tools.send_money]
    destinations = ["recipient"]                  # this tool's destinations (the rest: payloads)
    destination_sources = ["user", "trusted"]     # never a looked-up account

Standard library only (the lean agent client imports it); a file is read once, when the client
is made, and checked: an unknown key or source is a ValueError naming it.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT",
    "SOURCES",
    "GatePolicy",
    "ToolRule",
    "asked_kinds",
    "asks_action",
    "load",
    "parse",
]

SOURCES = ("user", "trusted", "lookup", "data", "instructed")
DEST_DEFAULT = frozenset({"user", "trusted", "lookup"})
PAYLOAD_DEFAULT = frozenset({"user", "trusted", "lookup", "data"})
STRICT = frozenset({"user", "trusted"})
NAMES_MAX = 256  # names a list of the file holds
NAME_MAX = 128
FILE_MAX = 256_000  # bytes of a policy file

# Words of a user's text that ask for an action a destination from data may serve: the user
# wants something sent, paid, shared, booked, created or changed (`asks_action`). Whole words
# of the text, lower case; the user's words alone decide (a tool output cannot add any).
ACTION_WORDS = frozenset(
    {
        "send",
        "pay",
        "transfer",
        "wire",
        "refund",
        "invite",
        "email",
        "e-mail",
        "mail",
        "message",
        "dm",
        "share",
        "post",
        "forward",
        "reply",
        "book",
        "reserve",
        "buy",
        "purchase",
        "create",
        "add",
        "schedule",
        "reschedule",
        "update",
        "change",
        "adjust",
        "set",
        "delete",
        "remove",
        "cancel",
        "write",
        "upload",
        "publish",
        "submit",
        "notify",
        "contact",
        "call",
        "move",
        "rename",
        "grant",
        "follow",
        "settle",
        "edit",
        "put",
        "inform",
    }
)
# Words after which an action word is a noun (`the email`, `in a message`, `my order`).
NOT_VERB_AFTER = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "each",
        "every",
        "any",
        "some",
        "no",
        "in",
        "on",
        "of",
        "from",
        "with",
        "about",
        "for",
        "by",
        "new",
        "latest",
        "last",
        "first",
        "next",
        "recent",
        "same",
    ]
)
_WORD = re.compile(r"[a-z][a-z-]{0,20}")
TEXT_MAX = 4_000


def asks_action(text: str | None) -> bool | None:
    """Whether a user's text asks for an action: one of ACTION_WORDS (or its -s/-es form) that
    no article, possessive or preposition comes before (`send the report`, not `in an email`);
    None when there is no text (unknown: the gate then reads a value as looked up)."""
    if not isinstance(text, str) or not text.strip():
        return None
    prev = ""
    for w in _WORD.findall(text[:TEXT_MAX].lower()):
        if prev not in NOT_VERB_AFTER:
            if w in ACTION_WORDS:
                return True
            for end in ("s", "es"):
                if w.endswith(end) and w[: -len(end)] in ACTION_WORDS:
                    return True
        prev = w
    return False


# What a user's words say a looked-up destination may be (`asked_kinds`): a payment needs an
# account, an invitation or an e-mail an address, a post a site, a call a number. A destination
# of another kind, found in data, is data (`data`), whatever the result said around it.
KIND_WORDS: dict[str, frozenset[str]] = {
    "iban": frozenset(
        [
            "pay",
            "paid",
            "payment",
            "payments",
            "transfer",
            "transfers",
            "wire",
            "refund",
            "rent",
            "money",
            "bill",
            "bills",
            "invoice",
            "iban",
            "account",
            "accounts",
            "transaction",
            "transactions",
            "landlord",
            "salary",
            "amount",
            "settle",
        ]
    ),
    "email": frozenset(
        [
            "email",
            "e-mail",
            "emails",
            "mail",
            "invite",
            "invitation",
            "share",
            "forward",
            "reply",
            "participants",
            "participant",
            "attendees",
            "contact",
            "contacts",
            "address",
            "meeting",
            "event",
            "calendar",
            "colleague",
            "cc",
            "bcc",
        ]
    ),
    "url": frozenset(
        ["post", "publish", "upload", "website", "webpage", "page", "site", "url", "link", "links", "blog"]
    ),
    "phone": frozenset(["call", "phone", "text", "sms", "dial"]),
}
# kinds of a call's values, as `KIND_WORDS` groups them
KIND_GROUP = {
    "iban": "iban",
    "number": "iban",
    "part": "iban",
    "email": "email",
    "url": "url",
    "domain": "url",
    "phone": "phone",
}


def asked_kinds(text: str | None) -> frozenset[str] | None:
    """What the user's text asks for, as the gate reads it: None (no text: unknown), an empty
    set (no action asked for: `asks_action` False), or the destination kinds (`KIND_WORDS`
    groups) its words name; an action with no kind named (`send it`) leaves every kind open."""
    asked = asks_action(text)
    if asked is None:
        return None
    if not asked:
        return frozenset()
    words = set(_WORD.findall(str(text)[:TEXT_MAX].lower()))
    got = frozenset(k for k, ws in KIND_WORDS.items() if words & ws)
    return got or frozenset(KIND_WORDS)


@dataclass(frozen=True, slots=True)
class ToolRule:
    """One tool's rule from the file's `[tools.<name>]` table (None: the policy's default)."""

    acts: bool | None = None
    trusted: bool | None = None
    destinations: frozenset[str] | None = None
    destination_sources: frozenset[str] | None = None
    payload_sources: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What the gate reads besides the taint: see the module doc. Names compare lower case."""

    trusted_tools: frozenset[str] = frozenset()
    acting_tools: frozenset[str] = frozenset()
    read_tools: frozenset[str] = frozenset()
    destination_args: frozenset[str] = frozenset()
    destination_sources: frozenset[str] = DEST_DEFAULT
    payload_sources: frozenset[str] = PAYLOAD_DEFAULT
    tools: Mapping[str, ToolRule] = field(default_factory=dict)

    def rule(self, tool: str) -> ToolRule:
        return self.tools.get(tool.lower(), _NO_RULE)

    def trusted(self, tool: str) -> bool:
        t = tool.lower()
        r = self.tools.get(t)
        if r is not None and r.trusted is not None:
            return r.trusted
        return t in self.trusted_tools

    def acts(self, tool: str) -> bool | None:
        """True/False when the policy says whether `tool` acts, None: its name decides."""
        t = tool.lower()
        r = self.tools.get(t)
        if r is not None and r.acts is not None:
            return r.acts
        if t in self.acting_tools:
            return True
        if t in self.read_tools:
            return False
        return None

    def allowed(self, tool: str, dest: bool, strict: bool) -> frozenset[str]:
        """The sources a destination (`dest`) or a payload of `tool` may come from."""
        r = self.rule(tool)
        got = (r.destination_sources or self.destination_sources) if dest else None
        if got is None:
            got = r.payload_sources or self.payload_sources
        return got & STRICT if strict else got


_NO_RULE = ToolRule()
DEFAULT = GatePolicy()

_TOP = {
    "trusted_tools",
    "acting_tools",
    "read_tools",
    "destination_args",
    "destination_sources",
    "payload_sources",
    "tools",
}
_TOOL = {"acts", "trusted", "destinations", "destination_sources", "payload_sources"}


def _names(where: str, v: object) -> frozenset[str]:
    if not isinstance(v, list) or len(v) > NAMES_MAX:
        raise ValueError(f"gate policy: {where} must be a list of at most {NAMES_MAX} names")
    out = set()
    for x in v:
        if not isinstance(x, str) or not x.strip() or len(x) > NAME_MAX:
            raise ValueError(f"gate policy: {where} holds {str(x)[:60]!r}, not a name")
        out.add(x.strip().lower())
    return frozenset(out)


def _sources(where: str, v: object) -> frozenset[str]:
    got = _names(where, v)
    bad = sorted(got - set(SOURCES))
    if bad:
        raise ValueError(
            f"gate policy: {where}: unknown source {bad[0][:60]!r} (known: {', '.join(SOURCES)})"
        )
    return got | {"user"}  # the user's own values are never refused


def _flag(where: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"gate policy: {where} must be true or false")
    return v


def parse(data: object) -> GatePolicy:
    """A policy from the file's parsed content (a mapping); ValueError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("gate policy: the file must hold a table (an object)")
    unknown = sorted(set(map(str, data)) - _TOP)
    if unknown:
        raise ValueError(f"gate policy: unknown key {unknown[0][:60]!r} (known: {', '.join(sorted(_TOP))})")
    tools: dict[str, ToolRule] = {}
    raw_tools = data.get("tools", {})
    if not isinstance(raw_tools, Mapping) or len(raw_tools) > NAMES_MAX:
        raise ValueError(f"gate policy: tools must be a table of at most {NAMES_MAX} tools")
    for name, t in raw_tools.items():
        where = f"tools.{str(name)[:60]}"
        if (
            not isinstance(name, str)
            or not name.strip()
            or len(name) > NAME_MAX
            or not isinstance(t, Mapping)
        ):
            raise ValueError(f"gate policy: {where} must be a table")
        bad = sorted(set(map(str, t)) - _TOOL)
        if bad:
            raise ValueError(
                f"gate policy: {where}: unknown key {bad[0][:60]!r} (known: {', '.join(sorted(_TOOL))})"
            )
        tools[name.strip().lower()] = ToolRule(
            acts=_flag(f"{where}.acts", t["acts"]) if "acts" in t else None,
            trusted=_flag(f"{where}.trusted", t["trusted"]) if "trusted" in t else None,
            destinations=_names(f"{where}.destinations", t["destinations"]) if "destinations" in t else None,
            destination_sources=_sources(f"{where}.destination_sources", t["destination_sources"])
            if "destination_sources" in t
            else None,
            payload_sources=_sources(f"{where}.payload_sources", t["payload_sources"])
            if "payload_sources" in t
            else None,
        )

    def names(key: str) -> frozenset[str]:
        return _names(key, data[key]) if key in data else frozenset()

    return GatePolicy(
        trusted_tools=names("trusted_tools"),
        acting_tools=names("acting_tools"),
        read_tools=names("read_tools"),
        destination_args=names("destination_args"),
        destination_sources=_sources("destination_sources", data["destination_sources"])
        if "destination_sources" in data
        else DEST_DEFAULT,
        payload_sources=_sources("payload_sources", data["payload_sources"])
        if "payload_sources" in data
        else PAYLOAD_DEFAULT,
        tools=tools,
    )


def load(path: str | Path) -> GatePolicy:
    """The policy in a TOML (`.toml`) or JSON file; ValueError with the file's name and what is
    wrong (unreadable, too big, not TOML/JSON, an unknown key or source)."""
    p = Path(path)
    try:
        raw = p.read_bytes()[: FILE_MAX + 1]
    except OSError as exc:
        raise ValueError(f"gate policy {str(p)[:200]}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > FILE_MAX:
        raise ValueError(f"gate policy {str(p)[:200]}: larger than {FILE_MAX} bytes")
    try:
        data: Any = tomllib.loads(raw.decode("utf-8")) if p.suffix.lower() == ".toml" else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if p.suffix.lower() == ".toml" else "JSON"
        raise ValueError(f"gate policy {str(p)[:200]}: not valid {kind}: {str(exc)[:200]}") from None
    try:
        return parse(data)
    except ValueError as exc:
        raise ValueError(f"{str(p)[:200]}: {exc}") from None
