"""What an answer rests on, for verification_skip's check of a run's final answer.

A group chat or a manager/worker run often ends on an answer that no step produced: an expert
states a price, another "verifies" it by restating it, and the chat terminates (MAST's "no or
incomplete verification"); or a manager's code prints its own request instead of delegating and
then answers from memory. Here an answer is reduced to its facts (numbers, quoted or bold
values, or a short answer's words), and the run keeps a bounded memory of the words and
numbers its tool outputs produced. A fact is confirmed when a tool output contains it; one
the task itself gives needs no confirmation. A line of output that only repeats a string
literal of its own call (`print(task)`, `final_answer("x")`) is the agent's text, not evidence.

The memory is two Bloom filters of EVIDENCE_BITS (the current one and the one before, base64
in the state: 1.4 KB each), so it is bounded whatever the run's length; a false positive can
only hide an unchecked fact, never invent one. An output is read whole (up to OBS_READ chars:
a fact in the middle of a long search result counts), and at most TOKENS_PER_STEP of its
tokens are remembered (its numbers first); a filter that the output would fill past
GENERATION tokens is retired first, so no filter holds more (~3 % false positives).
"""

from __future__ import annotations

import base64
import functools
import re
import zlib

from .shell import is_shell_program

EVIDENCE_BITS = 8192  # 2 bits per token from one crc32: ~3 % false positives in a full filter
GENERATION = 800  # tokens a filter takes before the older one is dropped
TOKENS_PER_STEP = 600  # distinct tokens of one output that are remembered (at most GENERATION)
OBS_READ = 20_000  # chars of an output read whole (the step's limit by default) ...
OBS_HEAD = 16_000  # ... and of a longer one, its start ...
OBS_TAIL = 4_000  # ... and its end (a result printed last)
CLAIM_HEAD = 1500  # chars of a message read for its facts from its start ...
CLAIM_TAIL = 700  # ... and from its end (where a conclusion sits)
SHORT_ANSWER = 80  # an explicit answer this short is one fact: all its words ...
SHORT_ANSWER_WORDS = 8  # ... if it is no sentence of more words
MAX_FACTS = 8
MAX_BLOCKS = 8  # code blocks of one message read
FACT_CHARS = 60

# Numbers as values (`950,000`, `1.445`, `3.1.3.1`), not digits inside a path, a URL, an id
# (`cca530fc-4052`) or a fraction (`3/4`): a run of digits, dots and commas, judged by the
# characters around it (`_numbers`).
# Starts only at a digit no letter, digit or path character precedes (the run is glued there):
# the scan skips those in C instead of a Python loop over every digit run of an id-heavy
# output (the digit first, then the look back: a leading look-behind would slow the scan).
NUMBER_RUN = re.compile(r"\d(?<![\w.,/\\-]\d)[\d,.]*+")
THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})++(?:\.\d++)?+")
WORD = re.compile(r"\w++")  # lower-cased words of an output or a fact (underscores kept)
URL = re.compile(r"\b(?:https?|ftp|file)://\S*+")  # its digits are not values
QUOTED_VALUE = re.compile(r"[\"“]([^\"”\n]{1,60})[\"”]")
BOLD = re.compile(r"\*\*([^*\n]{1,60})\*\*")
FENCED = re.compile(r"```[ \t]*+\n?([^`\n]{1,60})\n?```")
# Languages an executor runs; a fence tagged otherwise ("text") or not at all is code only when
# its text reads as code (`CODE_SYNTAX`). Every part starts where a word or a line starts.
CODE_LANGS = frozenset(
    {"python", "py", "python3", "ipython", "sh", "bash", "shell", "console", "zsh", "r", "js", "javascript"}
)
LANG_TAG = re.compile(r"[\w+#.-]{1,20}")
CODE_SYNTAX = re.compile(
    r"^[ \t]*+(?:import|from|def|class|for|while|if|with|print|return)\b|(?<!\w)[A-Za-z_]\w*+[ \t]*+\(|"
    r"^[ \t]*+[A-Za-z_][\w.]*+(?:\[[^\]\n]{0,80}\])?[ \t]*+[-+*/]?=(?!=)",
    re.MULTILINE,
)
COMMENT = re.compile(r"(?<!\S)#[ \t][^\n]*+")  # `# Expected output: "x"` is a note, not the call's text
STRING_LITERAL = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")
CALL_NUMBER = re.compile(r"\(\s*+(?:\w++\s*+=\s*+)?(-?\d[\d.,]*+)\s*+\)")
REFUSAL = re.compile(
    r"\b(unable|cannot|can't|could not|couldn't|not (?:be )?(?:found|determined|available|possible)|"
    r"unknown|no answer|insufficient|n/a)\b",
    re.IGNORECASE,
)
STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "answer",
        "are",
        "as",
        "at",
        "be",
        "by",
        "final",
        "for",
        "from",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "result",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "which",
        "who",
        "with",
    ]
)
# Words too common to say that an output confirms anything (left out of the memory).
COMMON = frozenset(
    [
        "a",
        "about",
        "after",
        "all",
        "also",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "more",
        "most",
        "no",
        "not",
        "of",
        "on",
        "one",
        "only",
        "or",
        "other",
        "our",
        "out",
        "over",
        "she",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "up",
        "was",
        "we",
        "were",
        "what",
        "when",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
MARK = "“"  # a fact the answer highlights (quoted, bold, fenced): it must be confirmed itself


def _number(s: str) -> str:
    s = s.replace(",", "")
    if "." in s and s.count(".") == 1:
        whole, frac = s.split(".")
        s = whole if not frac.strip("0") else f"{whole}.{frac.rstrip('0')}"
    return s


def _numbers(text: str) -> list[str]:
    """The numbers of a text as values, normalised; a digit run glued to a word, a path, an id
    or a fraction is not one."""
    out: list[str] = []
    n = len(text)
    for m in NUMBER_RUN.finditer(text):
        run = m.group().rstrip(".,")
        a, b = m.start(), m.start() + len(run)
        before = text[a - 1] if a else " "
        after = text[b] if b < n else " "
        if before.isalnum() or before in "_.,/\\-" or after.isalnum() or after in "_/\\-":
            continue
        if "," in run and not THOUSANDS.fullmatch(run):
            out.extend(_number(x) for x in run.split(",") if x and x[0].isdigit())
        else:
            out.append(_number(run))
    return out


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def tokens(text: str) -> set[str]:
    """The numbers (normalised: `950,000` = `950000`, `70.0` = `70`) and lower-cased words of
    a text: what an output remembers and an answer's fact is compared on."""
    out = set(_words(text))
    out.update(_numbers(text))
    return out


def _norm(text: str) -> str:
    return "".join(_words(text))


@functools.lru_cache(maxsize=256)
def task_facts(task: str) -> tuple[frozenset[str], str]:
    """A task's tokens and its letters run together (a short answer spelled out in the task,
    a grid of letters read in order, is given, not found)."""
    return frozenset(tokens(task)), _norm(task)


@functools.lru_cache(maxsize=256)
def _task_head(task: str) -> str:
    return " ".join(task[:200].split())[:50]


def quotes_task(text: str, task: str | None) -> bool:
    """A message that carries the task itself (a briefing), not a result."""
    head = _task_head(task) if task else ""
    return len(head) >= 20 and head in " ".join(text[:1500].split())


def plain(fact: str) -> str:
    """A fact as the steering text names it (without its highlight mark)."""
    return fact.removeprefix(MARK).removesuffix("”")


@functools.lru_cache(maxsize=1024)
def _fact_tokens(fact: str) -> frozenset[str]:
    """A fact's words and numbers that say something (a number's digit groups are not words).
    Cached: a run's facts are checked again on every tool output until one confirms them."""
    text = plain(fact)
    numbers = set(_numbers(text))
    words = {w for w in _words(text) if not w.isdigit()}
    return frozenset((words | numbers) - STOP - COMMON)


def facts(text: str, task: str | None, short: bool) -> list[str]:
    """The facts an answer or result states that the task does not give: a short explicit
    answer is one fact; a longer text's facts are its multi-digit numbers and the values it
    quotes, bolds or fences (marked, highlighted: the answer itself more often than not)."""
    if len(text) > CLAIM_HEAD + CLAIM_TAIL:
        text = text[:CLAIM_HEAD] + "\n" + text[-CLAIM_TAIL:]
    text = text.replace("TERMINATE", " ")
    if "://" in text:
        text = URL.sub(" ", text)
    given, letters = task_facts(task or "")
    if short:
        t = " ".join(text.split())
        if not t or REFUSAL.search(t) or (_norm(t) and _norm(t) in letters):
            return []
        own = _fact_tokens(t)
        return [t[:FACT_CHARS]] if own and not own <= given else []
    found: list[str] = []
    for value in _highlighted(text):
        own = _fact_tokens(value)
        if own and not own <= given and not REFUSAL.search(value):
            found.append(MARK + value + "”")
    for n in _numbers(text):
        if len(n.replace(".", "")) >= 2 and n not in given:
            found.append(n)
    seen: dict[str, str] = {}
    for fct in found:
        seen.setdefault(_norm(fct), fct)
    return list(seen.values())[:MAX_FACTS]


def _highlighted(text: str) -> list[str]:
    out = [m.group(1) for m in QUOTED_VALUE.finditer(text)]
    out += [m.group(1) for m in FENCED.finditer(text)]
    for m in BOLD.finditer(text):
        before = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
        end = text.find("\n", m.end())
        rest = text[m.end() : end if end >= 0 else len(text)].strip()
        heading = "#" in before or (_list_head(before) and not rest)
        if heading or rest.startswith(":") or m.group(1).rstrip().endswith(":"):
            continue  # a heading (`1. **Data Gathering:**`, `## **Result**`), not a value
        out.append(m.group(1))
    values = [" ".join(v.strip(" .,;:'\"").split()) for v in out]
    # a path or a link is where something is, not a value the answer states
    return [v for v in values if v and len(v.split()) <= 5 and "/" not in v and "\\" not in v]


# A message that renders a tool's output (a browsing agent's page, a terminal's exit code and
# output), in the words tools print: in a chat of messages it is the tool output, not a claim.
RENDERED = re.compile(
    r"^(?:Address: \S+://|Viewport position:|Here is a screenshot of |The web browser is open to |"
    r"The following text is visible in the viewport|Automatic OCR of the page screenshot|"
    r"exit ?code: -?\d|The script ran(?:, then exited)?|Its output was:|Execution logs:|Code output:|"
    r"Observed output of cmd|STDOUT:|URL Source: \S+://)",
    re.MULTILINE | re.IGNORECASE,
)
RENDERED_HEAD = 1500  # chars of a message searched for it


# ... of those, the ones that show a page (what a browsing agent saw).
PAGE_RENDERED = re.compile(
    r"^(?:Address: \S+://|Viewport position:|Here is a screenshot of |The web browser is open to |"
    r"The following text is visible in the viewport|Automatic OCR of the page screenshot|URL Source: \S+://)",
    re.MULTILINE | re.IGNORECASE,
)


def renders_page(message: str) -> bool:
    """The message shows a page a browsing agent saw (see PAGE_RENDERED)."""
    return bool(PAGE_RENDERED.search(message[:RENDERED_HEAD]))


def renders_output(message: str) -> bool:
    """The message shows a tool's output (see RENDERED)."""
    return bool(RENDERED.search(message[:RENDERED_HEAD]))


def code_of(message: str, limit: int = 2000) -> str:
    """The fenced code blocks of a message (split, not a regex: an unclosed fence is linear),
    less the fences that hold no code: an answer, a quoted text or a table set in a fence is
    not a request to run anything."""
    if "```" not in message:
        return ""
    return "\n".join(part for part, _body in code_blocks(message, limit))[:limit]


def code_blocks(message: str, limit: int = 2000, tagged: bool = False) -> list[tuple[str, str]]:
    """The fenced blocks of a message that hold code (see `code_of`): (the fence's text, the
    code without its language tag), the first MAX_BLOCKS; `tagged`: only those tagged with a
    language an executor runs (an untagged fence may hold a poem that reads as code)."""
    if "```" not in message:
        return []
    blocks = []
    for part in message.split("```")[1::2]:
        head, nl, body = part.partition("\n")
        lang = head.strip() if nl and LANG_TAG.fullmatch(head.strip()) else ""
        body = body if lang or (nl and not head.strip()) else part
        if (lang.lower() in CODE_LANGS or not tagged) and is_code(lang, body[:limit]):
            blocks.append((part, body))
            if len(blocks) >= MAX_BLOCKS:
                break
    return blocks


def code_key(body: str) -> str:
    """A code block's fingerprint, whitespace aside: the same code shown again has the same."""
    return f"{zlib.crc32(' '.join(body.split()).encode('utf-8', 'replace')):08x}"


def is_code(lang: str, body: str) -> bool:
    """Whether a fenced block is code to run: tagged with a language an executor runs, or
    untagged and reading as code (a statement, a call, an assignment, a shell command); a
    block of comments alone runs nothing."""
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "//"))]
    if not lines:
        return False
    if lang.lower() in CODE_LANGS:
        return True
    return bool(CODE_SYNTAX.search(body)) or is_shell_program(lines[0].split(None, 1)[0])


def _list_head(before: str) -> bool:
    """Only a list marker (`- `, `1. `) before a bold span on its line."""
    b = before.strip().lstrip(">*- \t")
    return not b or (b[:-1].isdigit() and b[-1] in ".)")


def produced(observation: str, call_input: str) -> tuple[str, bool]:
    """The output less the lines that only print back a literal of the call that made it (a
    string or a number passed as is: `print(task)`, `final_answer("x")` produced nothing) and
    less bare labels (`Execution logs:`); and whether a literal was printed back."""
    if len(observation) > OBS_READ:
        observation = observation[:OBS_HEAD] + "\n" + observation[-OBS_TAIL:]
    call_input = COMMENT.sub("", call_input)
    literals = [m.group()[1:-1] for m in STRING_LITERAL.finditer(call_input)]
    literals += CALL_NUMBER.findall(call_input)
    low = observation.lower()
    if not any(x.strip() and x.lower() in low for x in literals):
        return observation, False  # nothing of the call is printed back: the output is its own
    whole = set(literals)
    joined = "".join(literals)
    parts = sorted((x for x in whole if len(x) >= 3), key=len, reverse=True)[:40]
    longest = len(joined)  # a longer line cannot be a literal
    whole_n: set[str] | None = None
    joined_n = ""
    kept, echoed = [], False
    for line in observation.splitlines():
        text = line.strip()
        if not text or (text.endswith(":") and len(text.split()) <= 5):
            continue  # empty, or a label such as `Execution logs:`
        if len(text) <= 2 * longest + 40:
            rest = text.split(":", 1)[1].strip() if ":" in text else ""
            hit = any(x and (x in whole or (len(x) >= 20 and x in joined)) for x in (text, rest))
            if not hit and any(x in text for x in parts):  # a repr or an f-string of literals: the words
                if whole_n is None:
                    whole_n, joined_n = {_norm(x) for x in literals}, _norm(joined)
                hit = any(
                    x and (x in whole_n or (len(x) >= 20 and x in joined_n))
                    for x in (_norm(text), _norm(rest))
                )
            if hit:
                echoed = True  # a literal, or `Code output: <literal>`
                continue
        kept.append(line)
    return "\n".join(kept), echoed


def _bits(token: str) -> tuple[int, int]:
    h = zlib.crc32(token.encode())
    return h & (EVIDENCE_BITS - 1), (h >> 13) & (EVIDENCE_BITS - 1)


def _decode(packed: str) -> bytes:
    return base64.b64decode(packed) if packed else b""


def kept_hashes(found: set[str]) -> list[int]:
    """The hashes of the tokens of one output that are remembered (less the common words): all
    of them, or TOKENS_PER_STEP chosen the same way in every process (a set's order differs):
    its numbers first, then by hash, so no part of the output or of the alphabet is favoured."""
    crc = zlib.crc32
    kept = found - COMMON
    if len(kept) <= TOKENS_PER_STEP:
        return [crc(t.encode()) for t in kept]
    numbers = sorted(crc(t.encode()) for t in kept if t[0].isdigit())[:TOKENS_PER_STEP]
    room = TOKENS_PER_STEP - len(numbers)
    # the words whose hash falls below a bound that lets about `room` through: a sample the
    # same in every process, sorted only when it overflows
    bound = (room << 32) // max(1, len(kept) - len(numbers))
    words = [h for h in (crc(t.encode()) for t in kept if not t[0].isdigit()) if h < bound]
    return numbers + (sorted(words)[:room] if len(words) > room else words)


def rotate(current: str, older: str, count: int, adding: int) -> tuple[str, str, int]:
    """The filters to add `adding` tokens to: the current one, or a fresh one (the current one
    becoming the older) when they would fill it past GENERATION."""
    if count and count + adding > GENERATION:
        return "", current, 0
    return current, older, count


def remember(current: str, count: int, hashes: list[int]) -> tuple[str, int]:
    """The current filter (base64) with the tokens of `hashes` (`kept_hashes`) added, and its count."""
    bits = bytearray(_decode(current) or bytes(EVIDENCE_BITS // 8))
    mask = EVIDENCE_BITS - 1
    for h in hashes:
        i, j = h & mask, (h >> 13) & mask
        bits[i >> 3] |= 1 << (i & 7)
        bits[j >> 3] |= 1 << (j & 7)
    return base64.b64encode(bits).decode(), count + len(hashes)


def confirmed(fact: str, found: set[str] | None, current: str = "", older: str = "") -> bool:
    """Whether every token of a fact is in `found` (one output) or in the remembered outputs."""
    own = _fact_tokens(fact)
    if not own:
        return True
    if found is not None:
        return own <= found
    filters = [b for b in (_decode(current), _decode(older)) if b]
    return all(any(all(b[i >> 3] >> (i & 7) & 1 for i in _bits(t)) for b in filters) for t in own)
