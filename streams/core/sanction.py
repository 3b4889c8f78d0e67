"""The user's own wish (issue 49): a task that tells the agent to act on a named source.

"Read the e-mail from my manager and do exactly what it asks", "pay the bill in bill.txt",
"follow the instructions on the page": the user sanctions what that source says, so the values
its result brings (an address, an IBAN, an amount) are the user's for the calls that follow, not
data planted by someone else. The rule is bounded and deterministic, and keys on what the user
wrote and on the call that read the source, never on the wording of the result:

- `order(text)`: the user's text (the task, a later user message) holds an order to follow a
  source (`FOLLOW`, `DO_WHAT`, `AS_ASKED`, `PAY`, `DEST_IN_SOURCE`: "to the address in Alice's e-mail") and names its kind (`KINDS`: an e-mail, a message, a file,
  a document, a note, a bill, a page) or a file by name (`bill.txt`), in the same sentence. No
  kind and no name: no sanction (an order to "do what it says" of nothing named).
- `reads_source(order, tool, input)`: a call that reads that source: not an acting call
  (`streams.shared.taint.is_acting_tool`), and its tool's words name the kind (`search_emails`,
  `read_file`, `get_webpage`), or its input names the file.
- A result of such a call is sanctioned only while it holds no sign of an attacker's text
  (`BARRED`: an override of earlier instructions, talk of "the task I gave you", an address to
  an AI, a prompt's role markers): a manager's to-do list says "TODO: send the report to ...",
  not "ignore your previous instructions", and speaks to the user, not of "the user"
  (`THIRD_PERSON`: "TODO: send ... that includes the user's phone model"). An order to act on a source's data only ("pay the
  bill", no "do what it says") sanctions a result with no flagged instructions and at most one
  account: the bill's payee and amount, not a second account a line in it tells the reader to
  pay.
- At most SANCTIONED_MAX results are sanctioned per run, the first after the order; a named
  file sanctions that file only; a sanctioned source sanctions no other tool's output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..shared.taint import is_acting_tool, tool_words
from .instructions import Instructions

TEXT_MAX = 4_000  # characters of a user's text read for an order
TEXT_SCANNED = 16_000  # characters of a result the instruction spans stand in (`instructions.TEXT_MAX`)
SANCTIONED_MAX = 3  # results sanctioned per run
NAMES_MAX = 4  # file names an order keeps
# Signals (`core.instructions`) that only a planted text shows: a sanctioned source that holds
# one is read as data like any other (a manager's e-mail does not tell the reader to ignore its
# earlier instructions, nor speak to an AI, nor carry `<INFORMATION>`).
BARRED = frozenset({"override", "task", "address", "marker"})
# A source's own voice does not hide from its reader, switch language, speak of the user in the
# third person, or ask for the user's data to go out: text that does is planted in the source
# the user named, not what the user asked to follow. (A standing wish, "from this month on", is
# how a landlord's notice speaks too.)
NOT_THE_SOURCE = frozenset({"hidden", "foreign", "third", "exfil"})

_DET = r"(?:the|all(?:\s{1,3}the)?|my|these|those|this|its|his|her|their|each|every|any)\s{1,3}(?:[a-z'-]{1,20}\s{1,3}){0,2}?"
# An instruction that speaks of "the user" in the third person is written to whoever serves the
# user (an agent), not to the user the source was written to: "TODO: send ... that includes the
# user's phone model". A source the user asked to follow speaks to the user ("you", "your").
THIRD_PERSON = re.compile(r"\bthe\s{1,3}user(?:'s|\u2019s)?\b")
AROUND = 200  # characters around an instruction searched for it

# "do / follow / carry out the instructions / tasks / actions ... in / from / on / there"
FOLLOW = re.compile(
    r"\b(?:do|follow|complete|carry out|execute|perform|act on|action|handle|take care of|go through|"
    r"comply with|obey|fulfil{1,2}|implement|work through)\s{1,3}(?:[a-z'-]{1,20}\s{1,3}){0,2}?"
    + _DET
    + r"(?:instructions?|tasks?|actions?|steps?|requests?|to-?dos?|items?|directions|orders|asks?|points)\b"
    r"[^.!?\n]{0,30}?\b(?:in|from|on|inside|there|therein|listed|specified|described|given|mentioned|"
    r"contained|sent|written)\b"
)
# the tasks of the user's own text ("the following tasks", "the steps below"), not a source's
_OWN_LIST = re.compile(r"\b(?:following|below|above|these|listed\s{1,3}here)\b").search
# "do exactly what it asks", "follow whatever the note says"
DO_WHAT = re.compile(
    r"\b(?:do|follow|complete|carry out|execute|perform|act on|handle|comply with|obey)\s{1,3}"
    r"(?:exactly\s{1,3}|just\s{1,3}|precisely\s{1,3})?(?:what|whatever|everything|all)\b[^.!?\n]{0,40}?"
    r"\b(?:says?|asks?|tells?|requests?|lists?|wants?|instructs?|specifies|mentions|demands?)\b"
)
# "follow the e-mail", "follow the instructions precisely": the source itself is the object
FOLLOW_SOURCE = re.compile(
    r"\b(?:follow|obey|do|complete|carry out|execute|action)\s{1,3}"
    + _DET
    + r"(?:e-?mail|message|note|memo|to-?do(?:\s{1,3}list)?|checklist|instructions)\b"
)
# "answer the e-mail from the organisers as they ask", "reply to Bob's message as requested"
AS_ASKED = re.compile(
    r"\b(?:answer|reply\s{1,3}to|respond\s{1,3}to|deal\s{1,3}with|handle|process|act\s{1,3}on)\s{1,3}"
    r"(?:[a-z'-]{1,20}\s{1,3}){0,2}?(?:e-?mails?|messages?|notes?|requests?|letters?|invitations?)\b"
    r"[^.!?\n]{0,60}?\bas\s{1,3}(?:(?:they|it|he|she|requested|instructed|asked|told)\b|the\s{1,3}[a-z'-]{1,20}\s{1,3})"
    r"(?:\s{0,3}(?:asks?|asked|requests?|says?|instructs?|wants?|tells?)\b)?"
)
# "send it to the address in Alice's e-mail", "transfer the rent to the account given in the
# notice": a destination the task says the source holds (its data, not its instructions)
DEST_IN_SOURCE = re.compile(
    r"\b(?:to|into|at)\s{1,3}(?:the\s{1,3}|that\s{1,3})?(?:new\s{1,3})?"
    r"(?:e-?mail\s{1,3}address|address|account|iban|recipient|url|number|destination|payee|link)\s{1,3}"
    r"(?:(?:given|named|mentioned|listed|specified|provided|written|stated|shown|found)\s{1,3})?"
    r"(?:in|from|on|inside)\b"
)
# "pay the bill", "settle the invoice in invoice.pdf"
PAY = re.compile(r"\b(?:pay|settle)\s{1,3}" + _DET + r"(?:bill|invoice|rent|statement|amount due)s?\b")
# where the sentence that holds an order begins or ends (a dot inside a file name or a host is none)
SENTENCE_END = re.compile(r"[.!?:;](?=\s|$)|\n")
BACK, AHEAD = 200, 160  # characters of the order's sentence read before and after it
URL_LIKE = re.compile(r"(?<![@\w.-])(?:https?://|www\.|[a-z0-9-]{1,63}\.(?:com|org|net|io|co|dev|app)\b)")

# The kinds of source an order may name, and the words of the tools that read them.
KINDS: dict[str, frozenset[str]] = {
    "email": frozenset({"email", "emails", "mail", "mails", "inbox", "gmail", "outlook", "mailbox"}),
    "message": frozenset(
        {
            "message",
            "messages",
            "msg",
            "msgs",
            "inbox",
            "channel",
            "channels",
            "chat",
            "slack",
            "dm",
            "dms",
            "sms",
        }
    ),
    "file": frozenset(
        {"file", "files", "cat", "drive", "document", "documents", "doc", "docs", "attachment"}
    ),
    "note": frozenset({"note", "notes", "memo", "memos", "todo", "todos", "reminder", "reminders"}),
    "page": frozenset(
        {"webpage", "page", "web", "browse", "browser", "fetch", "url", "site", "website", "http"}
    ),
}
KIND_WORDS = re.compile(
    r"\b(?:(?P<email>e-?mails?|mails?|inbox)|(?P<message>messages?|dms?|channel|chat|slack)|"
    r"(?P<file>files?|documents?|docs?|bills?|invoices?|statements?|attachments?|spreadsheets?|pdf|notices?|letters?)|"
    r"(?P<note>notes?|memos?|to-?do(?:\s{1,3}list)?s?|checklist|reminders?)|"
    r"(?P<page>web\s?pages?|pages?|websites?|sites?|links?|urls?|posts?))\b"
)
NAMED = frozenset({"file", "note"})  # kinds a named file stands for
FILE_NAME = re.compile(
    r"\b[a-z0-9][\w-]{0,60}\.(?:txt|md|pdf|docx?|csv|json|eml|xlsx?|html?|ya?ml|rtf|odt)\b"
)


@dataclass(frozen=True, slots=True)
class Order:
    """An order to follow a named source: its kinds (`KINDS` keys) and the file names it names."""

    kinds: tuple[str, ...]
    names: tuple[str, ...]
    # the order is to do what the source says ("do what it asks", "follow the instructions in
    # it"), not only to act on its data ("pay the bill"): its own instructions are sanctioned too
    follow: bool = True


def order(text: str | None) -> Order | None:
    """The order to follow a named source that a user's text holds, or None (see the module doc)."""
    if not text or not isinstance(text, str):
        return None
    t = text[:TEXT_MAX].lower()
    if not any(
        w in t
        for w in (
            "do",
            "follow",
            "complet",
            "carry",
            "execut",
            "perform",
            "act",
            "handl",
            "pay",
            "settle",
            "obey",
            "compl",
            "fulfil",
            "implement",
            "work",
            "take care",
            "answer",
            "repl",
            "respond",
            "process",
            "deal",
            "address",
            "account",
            "iban",
            "recipient",
            "url",
            "number",
            "destination",
            "payee",
            "link",
        )
    ):
        return None
    kinds: list[str] = []
    names: list[str] = []
    follow = False
    for pat in (FOLLOW, DO_WHAT, FOLLOW_SOURCE, AS_ASKED, DEST_IN_SOURCE, PAY):
        for m in pat.finditer(t):
            if pat is FOLLOW and _OWN_LIST(m.group()):
                continue  # "perform the following tasks in the order given": the user's own list
            # the sentence the order stands in names its source (before or after the verb)
            a = max(0, m.start() - BACK)
            for e in SENTENCE_END.finditer(t, a, m.start()):
                a = e.end()
            e2 = SENTENCE_END.search(t, m.end(), m.end() + AHEAD)
            around = t[a : e2.start() if e2 else m.end() + AHEAD]
            found = [k.lastgroup for k in KIND_WORDS.finditer(around) if k.lastgroup]
            if URL_LIKE.search(around):
                found.append("page")
            files = [n[0] for n in FILE_NAME.finditer(around)]
            if pat is PAY:
                found.append("file")  # a bill is read from a file or a document
            elif not found and not files:
                continue  # an order that names no source ("do the steps in the order given")
            # a destination the task says the source holds is asked for in the source's own
            # words ("please transfer the rent to ..."): read like an order to follow it
            follow = follow or pat is not PAY
            for kind in found:
                if kind not in kinds:
                    kinds.append(kind)
            for n in files:
                if n not in names and len(names) < NAMES_MAX:
                    names.append(n)
    if not kinds and not names:
        return None
    return Order(tuple(kinds), tuple(names), follow)


def reads_source(o: Order, tool: str, call_input: str) -> bool:
    """Whether a call reads the source an order names: no acting call, and its tool's words
    name one of the order's kinds, or its input names one of its files."""
    if not tool or is_acting_tool(tool):
        return False
    kinds = o.kinds
    if o.names:
        low = call_input.lower()
        if any(n in low for n in o.names):
            return True
        # a named file is that file: another file the agent reads is not sanctioned
        kinds = tuple(k for k in kinds if k not in NAMED)
    words = set(tool_words(tool))
    return any(words & KINDS[k] for k in kinds if k in KINDS)


def sanctionable(o: Order, found: Instructions, values: Sequence[tuple[str, str, int]], text: str) -> bool:
    """Whether a result the order's source gave, with these instructions and values
    (`streams.shared.taint.scan`), may be sanctioned: none of `BARRED` or NOT_THE_SOURCE, and no instruction in it that
    speaks of "the user" (`THIRD_PERSON`); and, for an order to act on the source's data only
    ("pay the bill"), no flagged instructions and one account at most (a bill has one payee:
    one that also names another account, or tells the reader to pay it, is data)."""
    if BARRED.intersection(found.signals) or NOT_THE_SOURCE.intersection(found.signals):
        return False
    if _third_person(text, found.spans):
        return False
    if o.follow:
        return True
    return not found.flagged and len({v for k, v, _at in values if k == "iban"}) <= 1


def _third_person(text: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether an instruction (its span, AROUND characters either side) speaks of "the user"."""
    if not spans:
        return False
    t = text[:TEXT_SCANNED].lower()
    return any(THIRD_PERSON.search(t, max(0, a - AROUND), b + AROUND) for a, b in spans)
