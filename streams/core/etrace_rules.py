"""E-trace retrieval rules (SPEC section 8), pure: which tiers to query now, and what a
store's answers do to the decision and the run state.

The worker and `replay` both run `plan` -> (the store, I/O) -> `apply`, so a store that
answers the same way gives the same decisions live and offline. A tier is called at most
once per run (the hosted product's `max_calls=1`): an answered query uses the call up, hit
or miss; a query the store failed to answer does not, so a later eligible step retries.

E1 and E2 are answered one decision late, always: the queries a step plans are kept in the
run state (`etraces_pending`) and their guidance goes out with the run's next decision. The
worker starts them in the background as soon as the step's decision is sent, so they run
while the agent makes its model call and the next decision finds them ready: no decision
waits for a query embedding. Because the rule does not depend on timing, replay (which
answers them synchronously) gives the same decisions. E3 (a cached scroll, no embedding)
is answered on the first call itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..shared.untrusted import clean
from .decision import Injection, InjectionSource
from .fsm import FSMState

TIERS = ("e1", "e2", "e3")
E1_MIN_SIMILARITY = 0.8
E2_MIN_SIMILARITY = 0.7
E1_TOP_K = 1
E2_TOP_K = 2
E3_MAX = 32
E1_THOUGHTS = 3
E2_THOUGHTS = 5
CALLS_PER_RUN = 1
GATE_COMPOSITE = 0.15
THOUGHTS_KEPT = E2_THOUGHTS
THOUGHT_CHARS_KEPT = 240  # 5 x 240 chars stay inside MiniLM's 256-token window

# Model families patterns render for; a model id maps by prefix/substring.
FAMILIES = ("anthropic", "openai", "google", "meta", "mistral", "generic")
_PROVIDERS = {
    "anthropic": "anthropic",
    "bedrock": "anthropic",
    "openai": "openai",
    "azure_openai": "openai",
    "google_genai": "google",
    "google_vertexai": "google",
    "google": "google",
    "mistralai": "mistral",
}
_PREFIXES = (
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("gemini", "google"),
    ("llama", "meta"),
    ("meta-llama", "meta"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("codestral", "mistral"),
)
_SUBSTRINGS = (("claude", "anthropic"), ("gpt-", "openai"), ("gemini", "google"), ("llama", "meta"))


def model_family(model_id: str | None) -> str:
    """Family of a model id: "anthropic:claude-sonnet-4-5", "gpt-4.1-mini", "meta-llama/...".

    The routed model decides how patterns are rendered (and which model-specific patterns
    apply)."""
    if not model_id:
        return "generic"
    m = model_id.strip().lower()
    provider, sep, name = m.partition(":")
    if not sep:
        provider, name = "", m
    if provider in _PROVIDERS:
        return _PROVIDERS[provider]
    name = name.rsplit("/", 1)[-1]
    for prefix, fam in _PREFIXES:
        if name.startswith(prefix):
            return fam
    for sub, fam in _SUBSTRINGS:
        if sub in name:
            return fam
    return "generic"


@dataclass(frozen=True)
class Query:
    """One tier's retrieval request. `text` is None for E3 (scroll, no similarity)."""

    tier: str
    text: str | None
    org_id: str | None
    failure_type: str | None
    limit: int
    min_similarity: float | None

    def to_wire(self) -> list[Any]:
        """The compact form kept in the run state while the query is pending."""
        return [self.tier, self.text, self.org_id, self.failure_type, self.limit, self.min_similarity]

    @classmethod
    def from_wire(cls, w: Sequence[Any]) -> Query:
        return cls(str(w[0]), w[1], w[2], w[3], int(w[4]), w[5])


@dataclass(frozen=True)
class Hit:
    pattern_id: str
    similarity: float | None
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class Answer:
    """A store's answer to one query: hits (maybe empty) or the reason it could not answer."""

    tier: str
    hits: tuple[Hit, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Plan:
    """What `plan` asks the adapter to retrieve for one decision (frozen: an outcome's effects
    are handed to the adapter and never change)."""

    queries: tuple[Query, ...] = ()
    family: str = "generic"

    def __bool__(self) -> bool:
        return bool(self.queries)


def remember_thought(thoughts: list[str], thought: Any) -> list[str]:
    """The bounded window of recent thoughts the queries are built from."""
    if not isinstance(thought, str) or not thought.strip():
        return thoughts
    return [*thoughts[-(THOUGHTS_KEPT - 1) :], thought.strip()[:THOUGHT_CHARS_KEPT]]


def query_text(thoughts: Sequence[str], n: int) -> str | None:
    recent = [t for t in thoughts[-n:] if t]
    return "\n".join(recent) if recent else None


def e1_gate_open(
    monitors_enabled: bool, fired_now: Sequence[str], composite: float, previous: Sequence[Sequence[str]]
) -> bool:
    """Open if a monitor fired now, composite > 0.15 now, or a monitor fired on either of the
    two previous steps; always open when the run disabled its monitors."""
    if not monitors_enabled:
        return True
    return bool(fired_now) or composite > GATE_COMPOSITE or any(previous[-2:])


def plan_first_call(e3_calls: int, enabled: bool, family: str) -> Plan:
    if not enabled or e3_calls >= CALLS_PER_RUN:
        return Plan(family=family)
    return Plan((Query("e3", None, None, None, E3_MAX, None),), family)


def plan_step(
    *,
    enabled: bool,
    fsm_state: FSMState,
    org_id: str,
    thoughts: Sequence[str],
    e1_calls: int,
    e2_calls: int,
    gate_open: bool,
    failure_type: str | None,
    family: str,
    pending: Sequence[str] = (),
) -> Plan:
    """E1 and E2 for a scored step; never in FAST (or END), never on the first call, never a
    tier whose query is still `pending` (planned on the step before, answered now)."""
    if not enabled or fsm_state in (FSMState.FAST, FSMState.END, FSMState.INIT):
        return Plan(family=family)
    queries: list[Query] = []
    if e1_calls < CALLS_PER_RUN and gate_open and "e1" not in pending:
        text = query_text(thoughts, E1_THOUGHTS)
        if text:
            queries.append(Query("e1", text, org_id, None, E1_TOP_K, E1_MIN_SIMILARITY))
    if e2_calls < CALLS_PER_RUN and "e2" not in pending:
        text = query_text(thoughts, E2_THOUGHTS)
        if text:
            queries.append(Query("e2", text, None, failure_type, E2_TOP_K, E2_MIN_SIMILARITY))
    return Plan(tuple(queries), family)


def _family_ok(payload: Mapping[str, Any], family: str) -> bool:
    want = payload.get("model_family")
    return not want or str(want).lower() == family


def select(query: Query, hits: Sequence[Hit], family: str) -> list[Hit]:
    """The exact tier rules over a store's candidates (the store may return more)."""
    out: list[Hit] = []
    for h in hits:
        p = h.payload
        if p.get("tier") != query.tier or not _family_ok(p, family):
            continue
        if query.tier == "e1" and p.get("org_id") != query.org_id:
            continue  # never another org's pattern, whatever the similarity
        if (
            query.tier == "e2"
            and query.failure_type is not None
            and p.get("failure_type") != query.failure_type
        ):
            continue
        if query.min_similarity is not None:
            if h.similarity is None or h.similarity < query.min_similarity:
                continue
            gate = p.get("gate_threshold")
            if query.tier == "e1" and isinstance(gate, (int, float)) and h.similarity < gate:
                continue
        out.append(h)
    if query.min_similarity is not None:
        out.sort(key=lambda h: (-(h.similarity or 0.0), h.pattern_id))
    return out[: query.limit]


# -- rendering ----------------------------------------------------------------------------


# A pattern's fields are text from the store: an org's own patterns, shared ones written by
# others. They are guidance, but they pass through `untrusted.clean` like event text: cut, one
# line, no control character, no marker, and no markup of their own (only our tags below).
TITLE_CHARS, GUIDANCE_CHARS, UNLOCK_CHARS, DEAD_END_CHARS, DEAD_ENDS_MAX = 120, 800, 400, 200, 5


def _dead_ends(p: Mapping[str, Any]) -> list[str]:
    d = p.get("dead_ends")
    if isinstance(d, str):
        d = [d]
    if isinstance(d, list):
        kept = (clean(x, DEAD_END_CHARS) for x in d[: DEAD_ENDS_MAX * 4])
        return [x for x in kept if x][:DEAD_ENDS_MAX]
    return []


def render_pattern(tier: str, payload: Mapping[str, Any], family: str) -> str:
    """One pattern as guidance for the target model family.

    Anthropic models follow XML-tagged sections well; OpenAI-style and other models get
    compact Markdown. E3 rules are one line each."""
    title = clean(payload.get("title") or "", TITLE_CHARS)
    guidance = clean(payload.get("guidance") or "", GUIDANCE_CHARS)
    unlock = clean(payload.get("unlock") or "", UNLOCK_CHARS)
    dead = _dead_ends(payload)
    if tier == "e3":
        if family == "anthropic":
            return (
                f"<rule>{guidance}</rule>" if not title else f'<rule title="{_attr(title)}">{guidance}</rule>'
            )
        return f"- {title}: {guidance}" if title else f"- {guidance}"
    kind = "Guidance from your organisation's past runs" if tier == "e1" else "Guidance for this situation"
    if family == "anthropic":
        parts = [f'<guidance source="{tier}" title="{_attr(title)}">', guidance]
        if dead:
            parts.append("<dead_ends>" + "; ".join(dead) + "</dead_ends>")
        if unlock:
            parts.append(f"<unlock>{unlock}</unlock>")
        parts.append("</guidance>")
        return "\n".join(parts)
    lines = [f"**{kind}: {title}**" if title else f"**{kind}**", guidance]
    if dead:
        lines.append("Known dead ends: " + "; ".join(dead) + ".")
    if unlock:
        lines.append(f"What resolves it: {unlock}")
    return "\n".join(lines)


def _attr(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def injections_for(query: Query, chosen: Sequence[Hit], family: str) -> list[Injection]:
    source = cast(InjectionSource, query.tier)  # a Query's tier is one of e1, e2, e3
    return [
        {
            "source": source,
            "text": render_pattern(query.tier, h.payload, family),
            "pattern_id": h.pattern_id,
            "similarity": None if h.similarity is None else round(float(h.similarity), 6),
        }
        for h in chosen
    ]


def deferred_reason(queries: Sequence[Query]) -> str:
    """'e-traces E2 retrieving: its guidance comes with the next decision'."""
    tiers = ", ".join(q.tier.upper() for q in queries)
    its = "its" if len(queries) == 1 else "their"
    return f"e-traces {tiers} retrieving: {its} guidance comes with the next decision"


def failure_reason(errors: Mapping[str, str]) -> str:
    """'e-traces unavailable for E1, E2: timeout after 150 ms' (tiers grouped by error)."""
    groups: dict[str, list[str]] = {}
    for tier, err in sorted(errors.items()):
        groups.setdefault(err, []).append(tier.upper())
    return "e-traces unavailable " + "; ".join(f"for {', '.join(t)}: {e}" for e, t in groups.items())
