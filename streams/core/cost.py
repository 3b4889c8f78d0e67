"""What a run's model calls cost under a provider's prefix cache (pure: `rb-streams cost` reads
the files, `streams.cli.cost`).

The model (COST.md states it with the figures): call k of a run sends the agent's system
prompt, the task and the steps before it as Anthropic-shaped messages, composed with the
decision that answered step k-1 (its model, its steering text, at the placement asked for) by
the composer passed in (`streams.agent.compose.anthropic_request`: the very function agents
use). The agent marks two cache breakpoints, as coding agents do: the end of the system prompt
and the end of the last message. Each model has its own cache: a prefix written at a
breakpoint is readable for the model's TTL after its last use. A call reads the longest cached
prefix of its request, writes from there to its last breakpoint, pays the plain input price for
what follows the last breakpoint (the end placement's steering block) and the output price for
the step the model wrote. Tokens are estimated from the text (4 characters a token) unless
the step reports `usage`; every figure says whether it is an estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .prices import ModelPrice, PriceTable
from .routing import PRIOR_SYSTEM_TOKENS, text_tokens

Compose = Callable[[Mapping[str, Any], Mapping[str, Any], str], Mapping[str, Any]]
SYSTEM_TEXT = "You are a capable agent. " * (PRIOR_SYSTEM_TOKENS * 4 // 25)  # ~1,500 tokens
EPHEMERAL = {"type": "ephemeral"}


@dataclass
class Tally:
    """Tokens and dollars of a set of calls, by kind."""

    calls: int = 0
    read: int = 0
    write: int = 0
    plain: int = 0
    output: int = 0
    usd: float = 0.0
    write_usd: float = 0.0
    switches: int = 0
    per_call: list[float] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for k in ("calls", "read", "write", "plain", "output", "switches"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.usd += other.usd
        self.write_usd += other.write_usd

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "usd": round(self.usd, 6),
            "cache_write_usd": round(self.write_usd, 6),
            "tokens": {"read": self.read, "write": self.write, "plain": self.plain, "output": self.output},
            "switches": self.switches,
        }


class PrefixCache:
    """Each model's cached prefixes: prefix key -> the time it expires."""

    def __init__(self) -> None:
        self.by_model: dict[str, dict[int, float]] = {}

    def call(
        self,
        model: str,
        keys: Sequence[int],
        sizes: Sequence[int],
        breakpoints: Sequence[int],
        t: float,
        ttl: float,
    ) -> tuple[int, int, int]:
        """(read, written, plain) tokens of one request; its breakpoints are cached after it.
        `keys[i]`/`sizes[i]`: the key and the token count of the prefix ending at block i."""
        cache = self.by_model.setdefault(model, {})
        hit = -1
        for i in range(len(keys) - 1, -1, -1):
            exp = cache.get(keys[i])
            if exp is not None and exp > t:
                hit = i
                break
        last_bp = max(breakpoints) if breakpoints else -1
        read = sizes[hit] if hit >= 0 else 0
        top = sizes[last_bp] if last_bp >= 0 else 0
        written = max(0, top - read)
        total = sizes[-1] if sizes else 0
        plain = total - max(read, top)
        if hit >= 0:
            cache[keys[hit]] = t + ttl
        for i in breakpoints:
            cache[keys[i]] = t + ttl
        return read, written, plain


def _blocks(request: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """(role, text, breakpoint) of every block in prefix order: system, then the messages."""
    out: list[tuple[str, str, bool]] = []
    system = request.get("system")
    if isinstance(system, str):
        out.append(("system", system, False))
    elif isinstance(system, Sequence):
        for b in system:
            if isinstance(b, Mapping):
                out.append(("system", str(b.get("text") or ""), b.get("cache_control") is not None))
    for m in request.get("messages") or []:
        role = str(m.get("role"))
        content = m.get("content")
        if isinstance(content, str):
            out.append((role, content, False))
            continue
        for b in content or []:
            if isinstance(b, Mapping):
                out.append(
                    (role, str(b.get("text") or b.get("content") or ""), b.get("cache_control") is not None)
                )
    return out


def _assistant_text(step: Mapping[str, Any]) -> str:
    parts = [step.get("thought") or "", step.get("action") or ""]
    ai = step.get("action_input")
    if ai is not None:
        parts.append(ai if isinstance(ai, str) else str(ai))
    return "\n".join(p for p in parts if p) or "(no text)"


def _observation_text(step: Mapping[str, Any]) -> str:
    obs = step.get("observation")
    if obs is None:
        return "(no output)"
    return obs if isinstance(obs, str) else str(obs)


def _tokens(text: str, memo: dict[str, int]) -> int:
    n = memo.get(text)
    if n is None:
        n = memo[text] = text_tokens(text)
    return n


def price_for(model: str, prices: PriceTable) -> ModelPrice:
    p = prices.get(model)
    if p is None:
        raise KeyError(model)
    return p


def run_cost(
    start: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
    models: Sequence[str],
    injections: Sequence[str | None],
    prices: PriceTable,
    compose: Compose,
    placement: str = "end",
) -> Tally:
    """The cost of a run's calls: call k (1..n) wrote step k, on `models[k-1]` with the steering
    text `injections[k-1]` (what the decision answering step k-1 said)."""
    tally = Tally()
    cache = PrefixCache()
    memo: dict[str, int] = {}
    task = start.get("task") or "(no task)"
    history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": str(task)}]}]
    system = [{"type": "text", "text": SYSTEM_TEXT, "cache_control": EPHEMERAL}]
    t = float(start.get("ts") or 0.0)
    previous: str | None = None
    for k, step in enumerate(steps):
        model = models[k]
        p = price_for(model, prices)
        last = history[-1]
        marked = {
            **last,
            "content": [*last["content"][:-1], {**last["content"][-1], "cache_control": EPHEMERAL}],
        }
        request = {"model": model, "system": system, "messages": [*history[:-1], marked]}
        text = injections[k]
        decision = {"injection_text": text, "inject": text is not None, "model": None}
        composed = compose(request, decision, placement) if text is not None else request
        blocks = _blocks(composed)
        keys: list[int] = []
        sizes: list[int] = []
        bps: list[int] = []
        h, n = 0, 0
        for i, (role, btext, bp) in enumerate(blocks):
            h = hash((h, role, btext))
            n += _tokens(btext, memo)
            keys.append(h)
            sizes.append(n)
            if bp:
                bps.append(i)
        read, written, plain = cache.call(model, keys, sizes, bps, t, p.ttl_s)
        said = _assistant_text(step)
        out = text_tokens(said)
        usd = (read * p.cache_read + written * p.cache_write + plain * p.input + out * p.output) / 1e6
        tally.calls += 1
        tally.read += read
        tally.write += written
        tally.plain += plain
        tally.output += out
        tally.usd += usd
        tally.write_usd += written * p.cache_write / 1e6
        tally.per_call.append(usd)
        if previous is not None and model != previous:
            tally.switches += 1
        previous = model
        history.append({"role": "assistant", "content": [{"type": "text", "text": said}]})
        history.append({"role": "user", "content": [{"type": "text", "text": _observation_text(step)}]})
        ts = step.get("ts")
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            t = float(ts)
    return tally


def error_streak_steps(steps: Sequence[Mapping[str, Any]], streak_min: int = 2) -> set[int]:
    """Indexes of steps inside an error streak (`streak_min`+ consecutive error observations)."""
    out: set[int] = set()
    run: list[int] = []
    for i, s in enumerate([*steps, {}]):
        if s.get("observation_is_error"):
            run.append(i)
            continue
        if len(run) >= streak_min:
            out.update(run)
        run = []
    return out
