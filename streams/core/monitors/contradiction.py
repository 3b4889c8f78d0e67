"""claim_contradiction: the agent's conclusions contradict each other.

Reads what the agent concluded, not what it called: sentences with a conclusion marker ("the
root cause is", "this means", "I confirmed that", "so the X is ..."). Each claim is reduced to a
topic (negations removed, antonyms folded onto one side) and a polarity. A new claim on the
same topic (embedding match, fast model first, MiniLM when unsure) with the opposite polarity
contradicts the earlier one; two different root causes for the same failure are mutually
exclusive. An acknowledged revision ("actually", "I was wrong") is healthy self-correction and
scores low; a silent flip scores high.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .base import NOTHING, Context, Finding, Monitor, quote
from .features import TEXT_KEPT, StepFeatures
from .semantics import Semantics

MAX_CLAIMS = 8
FAST_HI = 0.9
FAST_LO = 0.5
SAME_TOPIC = 0.72  # MiniLM cosine above which two claims are about the same thing
DIFFERENT_CAUSE = 0.6  # two root causes less similar than this are different causes

SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
CONCLUSION = re.compile(
    r"\b(root cause|the (issue|problem|bug|error|failure|crash|culprit) (is|was|comes|lies)|"
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
    r"(\?\s*$|\b(maybe|might|may|perhaps|possibly|probably|likely|seems?|seemingly|appears?|"
    r"i (think|suspect|guess|believe|wonder)|could be|would be|not sure|unclear|hypothes[ie]s|"
    r"let me|let's|if)\b)",
    re.IGNORECASE,
)
REFINEMENT = re.compile(
    r"\b(specifically|more precisely|in particular|more specifically|namely|exactly)\b", re.I
)
# Each name read one way (possessive, the first capital after the first letter): as written
# before, `A_A_A...é` took time quadratic in its length.
IDENT = re.compile(r"`([^`]{2,60})`|\b([A-Za-z_][a-z]*+[A-Z_][A-Za-z0-9_]*+|[a-z]++_[a-z0-9_]++)\b")
REVISION = re.compile(
    r"\b(actually|i was wrong|on (closer|second) (look|inspection|thought)|correction|i (mis)?(read|"
    r"understood) (it )?wrong|contrary to what i|not .{1,40} after all|revis(e|ing) my|i previously|"
    r"my earlier|earlier i (said|thought|assumed)|it turns out|rather than)\b",
    re.IGNORECASE,
)
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


@dataclass(slots=True)
class Claim:
    """A conclusion the agent stated. Stored flattened: [text, polarity, is_cause, step, cause]."""

    text: str  # the topic, negations folded into `polarity`
    polarity: int
    is_cause: bool
    step: int
    cause_text: str  # what a root-cause claim names ("" otherwise)

    def encode(self) -> list[Any]:
        return [self.text, self.polarity, self.is_cause, self.step, self.cause_text]

    @classmethod
    def decode(cls, c: list[Any]) -> Claim:
        return cls(*c)


@dataclass(frozen=True)
class ContradictionState:
    claims: list[list[Any]] = field(default_factory=list)  # flattened `Claim`s, oldest first


def claims_of(thought: str) -> list[tuple[str, int, bool, str]]:
    """(topic, polarity, is_cause, original sentence) of each conclusion in a thought."""
    out = []
    for sent in SENTENCE.split(thought[:4000]):
        s = sent.strip()
        if len(s) < 12 or not CONCLUSION.search(s) or HEDGE.search(s):
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
        # A root cause is asserted unless negated; "stale tokens" in its description does not
        # make it a denial.
        is_cause = bool(CAUSE.search(s)) and not negated and not NOT_A_CAUSE.search(_cause_of(s))
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


def identifiers(text: str) -> set[str]:
    """Code names a sentence mentions (`x`, CamelCase, snake_case): what the claim is about."""
    return {(a or b).lower() for a, b in IDENT.findall(text)}


def evaluate(
    st: ContradictionState, f: StepFeatures, ctx: Context, sem: Semantics
) -> tuple[ContradictionState, Finding]:
    found = claims_of(f.thought)
    if not found:
        return st, NOTHING
    revised = bool(REVISION.search(f.thought))
    best = NOTHING
    claims = [Claim.decode(c) for c in st.claims]
    for topic, polarity, is_cause, sentence in found:
        if claims:
            sims = sem.matches(topic, [c.text for c in claims], FAST_HI, FAST_LO)
            for c, sim in zip(claims, sims, strict=True):
                # Opposite claims about the same subject: the code names must agree ("the main
                # parser has X" and "the subparser has not X" are about two things).
                if sim >= SAME_TOPIC and c.polarity != polarity and identifiers(topic) == identifiers(c.text):
                    score = 0.4 if revised else 0.85 if sim >= 0.85 else 0.7
                    text = (
                        f'You now conclude "{quote(sentence, 100)}", which contradicts your earlier '
                        f'conclusion at step {c.step} ("{quote(c.text, 80)}"). Do not build on '
                        "either until you have settled it: name the evidence for each and run one "
                        "check that tells them apart."
                    )
                    if score > best.score:
                        best = Finding(score, text)
            if is_cause:
                earlier = [c for c in claims if c.is_cause and c.step != f.step]
                if earlier:
                    mine = _cause_of(sentence)[:TEXT_KEPT]
                    cause_sims = sem.full_sims(mine, [c.cause_text for c in earlier])
                    worst = min(range(len(earlier)), key=lambda i: cause_sims[i])
                    refines = bool(REFINEMENT.search(sentence)) or bool(
                        identifiers(mine) & identifiers(earlier[worst].cause_text)
                    )
                    if cause_sims[worst] < DIFFERENT_CAUSE and not refines:
                        c = earlier[worst]
                        score = 0.3 if revised else 0.7
                        text = (
                            f'You now name the root cause as "{quote(mine, 80)}" but at step {c.step} '
                            f'you concluded it was "{quote(c.cause_text, 80)}", and you have not '
                            "said why that was wrong. Only one can be the cause: find the evidence that "
                            "rules one out before changing code."
                        )
                        if score > best.score:
                            best = Finding(score, text)
        cause = _cause_of(sentence)[:TEXT_KEPT] if is_cause else ""
        claims = [*claims, Claim(topic, polarity, is_cause, f.step, cause)][-MAX_CLAIMS:]
    if revised:
        # An acknowledged revision replaces what it revises: keep only the newest root cause.
        newest_cause = next((c for c in reversed(claims) if c.is_cause), None)
        claims = [c for c in claims if not c.is_cause or c is newest_cause]
    return ContradictionState(claims=[c.encode() for c in claims]), best


MONITOR = Monitor("claim_contradiction", "contradiction", "contradiction", ContradictionState, evaluate)
