"""claim_contradiction: the agent asserts and denies the same thing with nothing new between.

Reads what the agent concluded (sentences with a conclusion marker: "the root cause is", "this
means", "I confirmed that"), not what it called. Each claim keeps its topic (negations removed,
antonyms folded onto one side, so "is missing" meets "is present"), its polarity, the agent
that made it and how much evidence the run had seen by then.

Debugging is a chain of claims revised on evidence, so a later claim that differs is an update,
not a contradiction, when
- a tool returned something new between the two (a file read, a test result, a new error, an
  edit's result), or another agent spoke;
- the agent acknowledges the change ("actually", "not with X itself"), or a later root cause is
  about its own fix or a new failure ("still", "our previous fix", "the test script");
- it is a plan ("we need to ...", "how X is handled") rather than a finding.
What remains fires: the same proposition about the same code names asserted and denied by one
agent with nothing new in between. Two different root causes are judged the same way, and only
when each states a mechanism and neither names code inside the other's; that branch is off by
default (`monitor(different_causes=True)` turns it on): on real runs a new cause was almost
always the next level of the same bug or a new failure after a fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..quoting import quoted
from ..reading.features import TEXT_KEPT, StepFeatures
from .base import NOTHING, Context, Finding, Monitor, quote
from .semantics import Semantics

MAX_CLAIMS = 8
SEEN_KEPT = 16  # fingerprints of recent tool results: a result among them brings nothing new
QUIET_KEPT = 3  # tool steps since the last new result, to say what ran without news
FAST_HI = 0.9
FAST_LO = 0.5
SAME_TOPIC = 0.72  # MiniLM cosine above which two claims are about the same thing
DIFFERENT_CAUSE = 0.6  # two root causes less similar than this are different causes

SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
# The lookaheads (here and in HEDGE) name the first letters of the alternatives, so they change
# no match: word starts that cannot begin one are passed over at once (a 4,000-character
# sentence is searched 2-3x faster).
CONCLUSION = re.compile(
    r"\b(?=[chirstw])(root cause|the (issue|problem|bug|error|failure|crash|culprit) (is|was|comes|lies)|"
    r"this (means|shows|confirms|proves)|which (means|shows|confirms)|therefore|thus|hence|"
    r"i (found|confirmed|verified|realized|realised|conclude|determined) that|turns out|"
    r"so the|the answer is|in conclusion|conclusion:|confirmed:|"
    r"is (not |n't )?(the|a) (cause|culprit|reason|problem))\b",
    re.IGNORECASE,
)
# Explicit causal statements only: "the issue is reproduced", "the problem is about X" or "the
# change has been applied" name no cause.
CAUSE = re.compile(
    r"\b(root cause|(is|was|are|were) caused by|(is|was) due to|(fails?|failing|failed|breaks?|crash(es)?|"
    r"happens|occurs|errors?) because|the (issue|problem|bug|error|failure|crash|culprit) (is|was) "
    r"(that|because|in)\b|the (bug|culprit) (comes from|lies in))",
    re.IGNORECASE,
)
NOT_A_CAUSE = re.compile(
    r"^\s*(reproduced|resolved|fixed|solved|confirmed|gone|present|still there|addressed|applied|"
    r"related to|about|reported|clear|here|this)\b",
    re.IGNORECASE,
)
# A conjecture or a question is a step of the search, not a conclusion to hold the agent to.
HEDGE = re.compile(
    r"(\?\s*$|\b(?=[achilmnpsuw])(maybe|might|may|perhaps|possibly|probably|likely|seems?|seemingly|appears?|"
    r"i (think|suspect|guess|believe|wonder)|could be|would be|not sure|unclear|hypothes[ie]s|"
    r"let me|let's|if)\b)",
    re.IGNORECASE,
)
# What a claim says once its conclusion marker is read: a plan ("we need to", "how X is
# handled") is what to do next, not a finding that a later one could contradict.
PLAN = re.compile(
    r"^\W*+(?:(?:that|is|was|to)\s+)?(?:(?:we|i|you)\s+(?:still\s+|also\s+|just\s+)?"
    r"(?:need|needs|should|must|have to|ought to|want|will need)|(?:need|needs|should|must) to|how)\b",
    re.IGNORECASE,
)
# An explicit revision: the agent says the earlier claim no longer holds.
REVISION = re.compile(
    r"\b(actually|i was wrong|on (closer|second) (look|inspection|thought)|correction|i (mis)?(read|"
    r"understood) (it )?wrong|contrary to what i|not .{1,40} after all|revis(e|ing) my|i previously|"
    r"my earlier|earlier i (said|thought|assumed)|it turns out|rather|instead|"
    r"not (with|in|about|from) [^.;]{1,60}? itself)\b",
    re.IGNORECASE,
)
# A claim about our own fix, our script or the state after a change reports a new failure or the
# progress of one: it moves on from the earlier claim instead of contradicting it.
UPDATE = re.compile(
    r"\b(still|now|anymore|no longer|"
    r"our (previous |earlier |last |first |new |own )?(fix|fixes|change|changes|patch|edit|edits|attempt|"
    r"implementation|approach|code|test|tests|script|modification|modifications)|"
    r"my (previous |earlier |last )?(fix|change|patch|edit|attempt)|the (test|reproduc\w*) script)\b",
    re.IGNORECASE,
)
REFINEMENT = re.compile(
    r"\b(specifically|more precisely|in particular|more specifically|namely|exactly)\b", re.I
)
# A cause states a mechanism: its main clause has a verb. "The `x` method where it checks ..."
# and "the interaction between A and B" only name a place. The head ends at the first relative
# word after its start ("the X method where ..."); a leading "when ..., Y is ..." is kept whole.
RELATIVE = re.compile(r"\b(where|which|who|whose|when|while|how|that|because|if)\b", re.IGNORECASE)
FINITE = re.compile(
    r"\b(is|are|was|were|isn't|aren't|wasn't|weren't|has|have|had|hasn't|haven't|hadn't|does|do|did|"
    r"doesn't|don't|didn't|can|can't|cannot|could|couldn't|will|won't|would|wouldn't|may|might|must|being|"
    r"(it|we|they|he|she|that|there|this|you)'(re|s|ve|d|ll)|gets?|got|returns?|returned|uses?|used|"
    r"calls?|called|creates?|produces?|produced|ignores?|ignored|passes|passed|skips?|skipped|raises?|"
    r"raised|throws?|sets|checks|treats?|treated|converts?|converted|overrides?|overwrites?|strips?|"
    r"drops?|dropped|loses?|lost|includes?|excludes?|expects?|assumes?|compares?|matches|fails?|"
    r"failed|breaks?|caches|stores?|stored|reads|writes|keeps?|kept|removes?|removed|adds|added|"
    r"applies|generates?|splits?|parses?|renders?|makes?|made|takes?|took|misses|missed|lacks?|"
    r"contains?|leads?|causes?|triggers?|results|happens|occurs|runs|ran|evaluates?|resolves?)\b",
    re.IGNORECASE,
)
# Each name read one way (possessive, the first capital after the first letter): as written
# before, `A_A_A...é` took time quadratic in its length.
IDENT = re.compile(r"`([^`]{2,60})`|\b([A-Za-z_][a-z]*+[A-Z_][A-Za-z0-9_]*+|[a-z]++_[a-z0-9_]++)\b")
NAME_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
NEGATION = re.compile(
    r"\b(not|no|never|none|neither|nor|cannot|can't|isn't|aren't|wasn't|weren't|doesn't|don't|didn't|"
    r"won't|hasn't|haven't|shouldn't|couldn't|without)\b",
    re.IGNORECASE,
)
# Antonyms folded onto the positive word: "is broken" == "is not working".
ANTONYMS = {
    "broken": "working",
    "fails": "works",
    "failing": "passing",
    "failed": "passed",
    "incorrect": "correct",
    "wrong": "right",
    "invalid": "valid",
    "missing": "present",
    "absent": "present",
    "disabled": "enabled",
    "unset": "set",
    "unsafe": "safe",
    "false": "true",
    "different": "same",
    "unrelated": "related",
    "unnecessary": "necessary",
    "irrelevant": "relevant",
    "insecure": "secure",
    "unreachable": "reachable",
    "empty": "populated",
    "stale": "fresh",
    "outdated": "current",
    "unused": "used",
    "undefined": "defined",
    "buggy": "correct",
    "nonexistent": "existing",
}
WORD = re.compile(r"[A-Za-z']+|[^A-Za-z']+")
CONTENT = re.compile(r"[A-Za-z_][A-Za-z0-9_']*+")
STOP_WORDS = (
    "the a an and or but that this these those then than it its it's is are was were be been being "
    "of in on at to for from with by as into when where which who what how why there here so we we're "
    "our i you they he she has have had do does did can could will would should just also only very "
    "still now some any all one two not no"
)
STOP = frozenset(STOP_WORDS.split())
SAME_WORDS = 0.6  # share of content words two claims must have in common to state one proposition


@dataclass(slots=True)
class Claim:
    """A conclusion the agent stated. Stored flattened (`encode`); states written before `said`,
    `agent` and `known` existed decode with their defaults."""

    text: str  # the topic, negations folded into `polarity`
    polarity: int
    is_cause: bool
    step: int
    cause_text: str  # the mechanism a root-cause claim states ("" otherwise)
    said: str = ""  # the sentence as written: what the steering text quotes
    agent: str = ""
    known: int = -1  # the run's evidence count when the claim was made (-1: unknown, an update)

    def encode(self) -> list[Any]:
        return [
            self.text,
            self.polarity,
            self.is_cause,
            self.step,
            self.cause_text,
            self.said,
            self.agent,
            self.known,
        ]

    @classmethod
    def decode(cls, c: list[Any]) -> Claim:
        return cls(*c)


_CLAIM_FIELDS = len(Claim("", 0, False, 0, "").encode())


@dataclass(frozen=True)
class ContradictionState:
    claims: list[list[Any]] = field(default_factory=list)  # flattened `Claim`s, oldest first
    evidence: int = 0  # new tool results and changes of speaker so far
    seen: list[str] = field(default_factory=list)  # fingerprints of the last tool results
    quiet: list[list[Any]] = field(default_factory=list)  # [step, tool] run since the last new result
    speaker: str = ""  # the agent of the previous step


def claims_of(thought: str) -> list[tuple[str, int, bool, str]]:
    """(topic, polarity, is_cause, original sentence) of each conclusion in a thought."""
    text = thought[:4000]
    # A sentence's conclusion marker is a marker of the whole text too (a sentence is cut at
    # spaces, which no word touches): a text without one, most thoughts, is not split.
    return _claims(text) if CONCLUSION.search(text) else []


def _claims(text: str) -> list[tuple[str, int, bool, str]]:
    """`claims_of` of a cut text, sentence by sentence."""
    out = []
    for sent in SENTENCE.split(text):
        s = sent.strip()
        if len(s) < 12 or HEDGE.search(s):
            continue
        marker = CONCLUSION.search(s)
        if not marker or PLAN.match(s[marker.end() :]):
            continue
        polarity = 1
        negated = False  # by a negation word, not an antonym: "is not the root cause"
        words = []
        for tok in WORD.findall(s):
            low = tok.lower()
            if NEGATION.fullmatch(low):
                polarity = -polarity
                negated = not negated
                continue
            if low in ANTONYMS:
                polarity = -polarity
                words.append(ANTONYMS[low])
                continue
            words.append(tok)
        topic = " ".join("".join(words).split())
        topic = REVISION.sub("", topic).strip(" ,")
        # A root cause is asserted unless negated ("stale tokens" in its description does not
        # make it a denial), and it states a mechanism.
        is_cause = bool(CAUSE.search(s)) and not negated and is_mechanism(_cause_of(s))
        out.append((topic[:TEXT_KEPT], polarity, is_cause, s))
    return out[:3]


LEAD_IN = re.compile(r"^\s*(is|was|lies in|comes from)\b\s*", re.IGNORECASE)
CAUSE_BEFORE = re.compile(r"\b(is|was) (the|a)\s*$", re.IGNORECASE)


def _cause_of(topic: str) -> str:
    """What a root-cause claim names: "the root cause is X" and "X is the root cause: Y"."""
    m = CAUSE.search(topic)
    if not m:
        return topic
    before, after = topic[: m.start()], LEAD_IN.sub("", topic[m.end() :].strip(" :,"))
    if CAUSE_BEFORE.search(before):
        named = CONCLUSION.sub("", CAUSE_BEFORE.sub("", before)).strip(" ,:")
        return f"{named}: {after}" if after else named
    return after or topic


def is_mechanism(cause: str) -> bool:
    """A cause that says how the failure comes about, not a plan ("we need to", "how X is
    handled") or a bare place ("the `x` method", "the interaction between A and B")."""
    if not cause.strip() or NOT_A_CAUSE.search(cause) or PLAN.match(cause):
        return False
    head = cause[:TEXT_KEPT]
    rel = RELATIVE.search(head, 1) if not RELATIVE.match(head.lstrip()) else None
    if rel:
        head = head[: rel.start()]
    return bool(FINITE.search(head))


def proposition(sentence: str) -> set[str]:
    """The content words of what a claim asserts: the text after its conclusion marker ("I
    found that X is missing" -> X, missing), or before it when the marker ends the sentence ("X
    is the root cause"). Negations and antonyms are folded as in the topic."""
    m = CONCLUSION.search(sentence)
    part = sentence
    if m:
        after, before = sentence[m.end() :], sentence[: m.start()]
        part = after if len(CONTENT.findall(after)) >= 2 else before
    words = {w.lower() for w in CONTENT.findall(part)}
    return {ANTONYMS.get(w, w) for w in words if w not in STOP and not NEGATION.fullmatch(w)}


def identifiers(text: str) -> set[str]:
    """Code names a sentence mentions (`x`, CamelCase, snake_case): what the claim is about."""
    return {(a or b).lower() for a, b in IDENT.findall(text)}


def _nested(a: set[str], b: set[str]) -> bool:
    """The two claims name the same code, or code inside the other's (`Cls.method` and `method`,
    `pkg/mod.py` and `mod`): the same subject at another level."""
    if a & b:
        return True
    parts_a = {p.lower() for n in a for p in NAME_PART.findall(n)} - {"py", "the"}
    parts_b = {p.lower() for n in b for p in NAME_PART.findall(n)} - {"py", "the"}
    return bool(parts_a & parts_b)


def _between(st: ContradictionState, c: Claim, f: StepFeatures) -> str:
    """What happened between claim `c` and this step, given that nothing new came in."""
    ran = [(s, tool) for s, tool in st.quiet if s >= c.step]
    alone = " and no one else spoke" if f.agent else ""
    if not ran:
        return f"Nothing ran between the two{alone}"
    names = ", ".join(f"{quoted(tool, 40, 'tool name')} (step {s})" for s, tool in ran)
    return f"Nothing new came in between{alone}: {names} returned no new output"


def _said(sentence: str, n: int) -> str:
    """What the agent said, fenced: its words are data here, not ours."""
    return quoted(sentence.strip().rstrip(" .;:,"), n, "sentence")


def evaluate(
    st: ContradictionState, f: StepFeatures, ctx: Context, sem: Semantics, causes: bool = False
) -> tuple[ContradictionState, Finding]:
    evidence, speaker = st.evidence, st.speaker
    if f.agent != speaker:
        evidence += 1  # another agent speaks: what it says is news to the one before
        speaker = f.agent
    found = claims_of(f.thought)
    best = NOTHING
    stored = st.claims
    if found:
        claims = [Claim.decode(c) for c in st.claims]
        revised = bool(REVISION.search(f.thought))
        for topic, polarity, is_cause, sentence in found:
            # Only earlier claims of this agent with nothing new since: any other pair is an
            # update (sentences of one thought are the agent thinking aloud).
            held = [c for c in claims if c.agent == f.agent and c.known == evidence and c.step != f.step]
            if held and not revised:
                best = max(best, _flip(st, held, topic, polarity, sentence, f, sem), key=_score)
                if causes and is_cause and not UPDATE.search(sentence):
                    best = max(best, _other_cause(st, held, sentence, f, sem), key=_score)
            cause = _cause_of(sentence)[:TEXT_KEPT] if is_cause else ""
            new = Claim(topic, polarity, is_cause, f.step, cause, sentence[:TEXT_KEPT], f.agent, evidence)
            claims = [*claims, new][-MAX_CLAIMS:]
        stored = [c.encode() for c in claims]
    elif not all(type(c) is list and len(c) == _CLAIM_FIELDS for c in stored):
        stored = [Claim.decode(c).encode() for c in stored]  # an older state's claims, filled in
    seen, quiet = st.seen, st.quiet
    if f.action is not None and not f.message:
        new_result = bool(f.obs_norm) and f.obs_hash not in seen
        if new_result or f.modifies:
            # A result not seen before, or a change to the code: what the agent concludes next
            # may rightly differ from what it concluded before.
            evidence += 1
            seen = [*seen, f.obs_hash][-SEEN_KEPT:] if new_result else seen
            quiet = []
        else:
            quiet = [*quiet, [f.step, quote(f.action_label, 40)]][-QUIET_KEPT:]
    new_state = ContradictionState(claims=stored, evidence=evidence, seen=seen, quiet=quiet, speaker=speaker)
    return new_state, best


def _score(f: Finding) -> float:
    return f.score


def _flip(
    st: ContradictionState,
    held: list[Claim],
    topic: str,
    polarity: int,
    sentence: str,
    f: StepFeatures,
    sem: Semantics,
) -> Finding:
    """The same proposition about the same code names, asserted and denied."""
    best = NOTHING
    opposite = [c for c in held if c.polarity != polarity]
    if not opposite:
        return NOTHING
    mine = proposition(sentence)
    sims = sem.matches(topic, [c.text for c in opposite], FAST_HI, FAST_LO)
    for c, sim in zip(opposite, sims, strict=True):
        # "the main parser has X" and "the subparser has not X" are about two things, and "X,
        # but not Y" shares a subject with "X, then Z" but states another proposition.
        theirs = proposition(c.said or c.text)
        shared = len(mine & theirs) / max(len(mine | theirs), 1)
        if sim < SAME_TOPIC or shared < SAME_WORDS or identifiers(topic) != identifiers(c.text):
            continue
        score = 0.85 if sim >= 0.85 else 0.7
        if score > best.score:
            text = (
                f"At step {c.step} you concluded {_said(c.said or c.text, 90)}; now you conclude the "
                f"opposite: {_said(sentence, 90)}. {_between(st, c, f)}. Do not build on either: "
                "decide which one the evidence supports, or run one check that tells them apart, "
                "before you act on it."
            )
            best = Finding(score, text)
    return best


def _other_cause(
    st: ContradictionState, held: list[Claim], sentence: str, f: StepFeatures, sem: Semantics
) -> Finding:
    """A second mechanism for the same failure, neither naming code inside the other's."""
    earlier = [c for c in held if c.is_cause]
    if not earlier or REFINEMENT.search(sentence):
        return NOTHING
    mine = _cause_of(sentence)[:TEXT_KEPT]
    sims = sem.full_sims(mine, [c.cause_text for c in earlier])
    i = min(range(len(earlier)), key=lambda k: sims[k])
    c = earlier[i]
    if sims[i] >= DIFFERENT_CAUSE or _nested(identifiers(mine), identifiers(c.cause_text)):
        return NOTHING
    text = (
        f"At step {c.step} you named the root cause {_said(c.cause_text, 80)}; now you name "
        f"{_said(mine, 80)}. {_between(st, c, f)}. Only one can be the cause: find the evidence "
        "that rules one out before changing code."
    )
    return Finding(0.7, text)


def monitor(different_causes: bool = False) -> Monitor[ContradictionState]:
    """The monitor; `different_causes` also fires on a second, unrelated root cause held with
    nothing new between (off by default: on real runs it read refinements as contradictions)."""

    def run(
        st: ContradictionState, f: StepFeatures, ctx: Context, sem: Semantics
    ) -> tuple[ContradictionState, Finding]:
        return evaluate(st, f, ctx, sem, different_causes)

    return Monitor("claim_contradiction", "contradiction", "contradiction", ContradictionState, run)


MONITOR = monitor()
