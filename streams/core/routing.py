"""Which model a decision names: the FSM's `model_routing`, counted against the prompt cache.

The FSM and its states are the spec's; this module only decides whether the model a state
routes to is worth switching to. Every switch starts the other model on a cold cache (the
whole context written at the cache-write price) and, on the way back, the first model writes
what it missed. So a state whose routed model is cheaper than the run's home model (FAST,
usually) gets it only when the expected saving over the expected stint beats what the switch
costs in cache writes; a model as dear or dearer (SLOW's, the escalation ladder's) is named as
routed: spending by design, reported apart (`upgrade`). A switch across providers is never made
in the middle of a tool exchange (the step called a tool, so the next call carries its result)
unless the run allows it (`cross_provider_tool_switch`).

Pure and deterministic: time is the events' `ts` (never the worker's clock), sizes are
estimated from the events' text (or taken from `usage` when a step reports it), and prices
come in as data (`Policy.prices`; the documented prior without a table). The memory kept per
run is a few numbers and one entry per model (at most five), so per-step work is flat.
docs/difficulty.md has the rules with a worked example.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .prices import PRIOR_STATE_RATIO, PRIOR_UNIT, ModelPrice, PriceTable

ROUTED_STATES = ("FAST", "NORMAL", "SLOW", "SKIP")
# The weight of the call after a FAST stint in both plans: it happens only if the run goes on
# (19% of OpenHands' stints on the dev runs end the run, most of tau-bench's); a prior chosen
# on the dev runs (docs/difficulty.md says how).
RETURN_WEIGHT = 0.5
# Priors, for a run that has not shown its own yet (docs/difficulty.md):
PRIOR_STINT_CALLS = 3  # calls a FAST stint lasts (dev data: median 4, a quarter last 1-2)
PRIOR_CALL_S = 10.0  # seconds between calls when events carry no ts
PRIOR_SYSTEM_TOKENS = 1500  # the agent's system prompt and tool definitions
CHARS_PER_TOKEN = 4
STEP_OVERHEAD_TOKENS = 12  # role markers and tool-call framing per step
TOKENS_MAX = 10**9  # each token count routing reads is clamped to this (a call's input, output)
REASON_MAX = 300
# Every number the memory keeps is finite and bounded (issue 48: a cost of inf was stored as
# null, and the run's next event failed on it). Prices are at most PRICE_MAX per million tokens
# and token counts at most TOKENS_MAX, so a call costs at most ~$1e8; the run's totals
# saturate at COST_MAX. A `ts` outside [0, TS_MAX] (seconds; 2**53, what any JSON reader holds
# exactly) is read as absent: the call is timed by the prior pace, so no span is infinite.
COST_MAX = 1e12
TS_MAX = float(2**53)
COUNT_MAX = 2**53

Memory = dict[str, Any]
INIT_REASON = "none: the first call (INIT) goes to the run's model"


@dataclass(frozen=True, slots=True)
class Routed:
    """What routing named for the next call, and why (`code`: same, downgrade, declined,
    upgrade, return, held, escalate)."""

    model: str | None
    code: str
    reason: str


def enabled(model_routing: Mapping[str, str]) -> bool:
    return bool(model_routing)


def provider_of(model: str, prices: PriceTable) -> str | None:
    """The table's provider, else a guess from the id ("openai:gpt-4o", "claude-...")."""
    p = prices.get(model)
    if p is not None and p.provider:
        return p.provider
    m = model.strip().lower()
    head, sep, _ = m.partition(":")
    if sep and head:
        return head
    name = m.rsplit("/", 1)[-1]
    for prefix, prov in (("claude", "anthropic"), ("gpt", "openai"), ("o1", "openai"), ("o3", "openai")):
        if name.startswith(prefix):
            return prov
    if name.startswith("o4") or name.startswith("chatgpt"):
        return "openai"
    if name.startswith("gemini"):
        return "google"
    return None


def price_of(model: str, role: str, run_model: str | None, prices: PriceTable) -> tuple[ModelPrice, bool]:
    """(price, from the table?). An unpriced model: the run's model's price (or the prior's
    unit) times the prior ratio of the state that routes to it."""
    p = prices.get(model)
    if p is not None:
        return p, True
    base = prices.get(run_model) or PRIOR_UNIT
    return _scaled(base, PRIOR_STATE_RATIO.get(role, 1.0)), False


@functools.lru_cache(maxsize=64)
def _scaled(base: ModelPrice, k: float) -> ModelPrice:
    """`base.scaled(k)`, kept: an unpriced model's price is asked for several times a step,
    always of the same few (price, ratio) pairs."""
    return base.scaled(k)


def text_tokens(v: Any) -> int:
    """Tokens of one field, estimated from its characters (a JSON value by its encoding)."""
    if v is None:
        return 0
    if isinstance(v, str):
        n = len(v)
    elif isinstance(v, bool | int | float):
        n = 8
    else:
        import orjson

        try:
            n = len(orjson.dumps(v))
        except TypeError:
            n = 0
    return -(-n // CHARS_PER_TOKEN)


def step_tokens(ev: Mapping[str, Any]) -> tuple[int, int]:
    """(tokens the model wrote, tokens the tool answered) for one step, from its text."""
    out = text_tokens(ev.get("thought")) + text_tokens(ev.get("action")) + text_tokens(ev.get("action_input"))
    return out + STEP_OVERHEAD_TOKENS, text_tokens(ev.get("observation"))


def _usage_tokens(ev: Mapping[str, Any]) -> tuple[int, int] | None:
    """(input incl. cached, output) from a step's `usage`, when it reports one."""
    u = ev.get("usage")
    if not isinstance(u, Mapping):
        return None

    def num(*keys: str) -> int:
        for k in keys:
            v = u.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return min(v, TOKENS_MAX)
        return 0

    inp = num("input_tokens") + num("cache_read_tokens", "cache_read_input_tokens")
    inp += num("cache_write_tokens", "cache_creation_input_tokens")
    out = num("output_tokens")
    return (inp, out) if inp or out else None


def event_time(ts: Any) -> float | None:
    """An event's `ts` as routing reads it: a number in [0, TS_MAX], else None (absent)."""
    if isinstance(ts, int | float) and not isinstance(ts, bool) and 0 <= ts <= TS_MAX:
        return float(ts)
    return None


def start(run_model: str | None, task: str | None, ts: Any) -> Memory:
    """A run's routing memory at run_start (its first call goes to the home model)."""
    ctx = min(TOKENS_MAX, PRIOR_SYSTEM_TOKENS + text_tokens(task))
    t = event_time(ts) or 0.0
    return {
        "on": "",  # "" = the home model (the decision names none, or NORMAL's)
        "used": {},  # model -> [time of its last call, the input it cached]
        "ctx": ctx,  # the next call's input, estimated
        "ctx0": ctx,
        "out": 0,  # output tokens so far (mean per call = out / calls)
        "calls": 0,
        "t": t,  # when the next call starts (the last event's time)
        "t0": t,
        "stints": [0, 0],  # FAST stints finished, and their calls
        "cur": 0,  # calls in the current FAST stint
        "switches": 0,
        "upgrades": 0,
    }


def _finite(v: Any, lo: float, hi: float) -> bool:
    return (type(v) is float or type(v) is int) and lo <= v <= hi  # NaN compares false


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v <= COUNT_MAX


def sane(mem: Any) -> bool:
    """Whether a stored memory has every field `start` writes (and `b`, `cost`, `base`,
    `dollars` once a call was observed), each of its type and within its bounds."""
    if not isinstance(mem, dict) or not isinstance(mem.get("on"), str):
        return False
    if not all(_count(mem.get(k)) for k in ("ctx", "ctx0", "out", "calls", "cur", "switches", "upgrades")):
        return False
    if not (_finite(mem.get("t"), 0.0, TS_MAX) and _finite(mem.get("t0"), 0.0, TS_MAX)):
        return False
    stints, used, b = mem.get("stints"), mem.get("used"), mem.get("b")
    if not isinstance(stints, list) or len(stints) != 2 or not all(_count(x) for x in stints):
        return False
    if not isinstance(used, dict) or len(used) > 5:
        return False
    for u in used.values():
        if (
            not isinstance(u, list)
            or len(u) != 2
            or not (_finite(u[0], 0, TS_MAX) and _finite(u[1], 0, COUNT_MAX))
        ):
            return False
    if b is not None and (
        not isinstance(b, list)
        or len(b) != 2
        or not (_finite(b[0], 0, TS_MAX) and _finite(b[1], 0, COUNT_MAX))
    ):
        return False
    if not all(_finite(mem.get(k, 0.0), 0.0, COST_MAX) for k in ("cost", "base")):
        return False
    return isinstance(mem.get("dollars", True), bool)


def recover(mem: Any) -> Memory:
    """A stored memory made sane (`sane`), kept as it is when it already is. A state written
    before the bounds (issue 48: a cost of inf stored as null) keeps every field that holds;
    a field that does not restarts as `start` would (a total restarts at 0, a time at the run's
    last known time), so the run's next events are routed, never failed on."""
    if sane(mem):
        return mem  # type: ignore[no-any-return]
    old = mem if isinstance(mem, dict) else {}
    t = old.get("t") if _finite(old.get("t"), 0.0, TS_MAX) else 0.0
    new = start(None, None, t)
    if isinstance(old.get("on"), str):
        new["on"] = old["on"]
    for k in ("ctx", "ctx0", "out", "calls", "cur", "switches", "upgrades"):
        v = old.get(k)
        if _count(v):
            new[k] = v
    if _finite(old.get("t0"), 0.0, TS_MAX):
        new["t0"] = float(old["t0"])
    stints = old.get("stints")
    if isinstance(stints, list) and len(stints) == 2 and all(_count(x) for x in stints):
        new["stints"] = list(stints)
    used = old.get("used")
    if isinstance(used, dict):
        good = [
            (str(m), [float(u[0]), u[1]])
            for m, u in used.items()
            if isinstance(u, list)
            and len(u) == 2
            and _finite(u[0], 0, TS_MAX)
            and _finite(u[1], 0, COUNT_MAX)
        ]
        new["used"] = dict(sorted(good, key=lambda kv: kv[1][0])[-5:])
    b = old.get("b")
    if isinstance(b, list) and len(b) == 2 and _finite(b[0], 0, TS_MAX) and _finite(b[1], 0, COUNT_MAX):
        new["b"] = [float(b[0]), b[1]]
    for k in ("cost", "base"):
        if k in old:
            v = old[k]
            new[k] = float(v) if _finite(v, 0.0, COST_MAX) else 0.0
    if "dollars" in old:
        new["dollars"] = old["dollars"] is True
    return new


def home_of(model_routing: Mapping[str, str], run_model: str | None) -> str:
    """The model a stint returns to: NORMAL's, else the run's own (its id, or "")."""
    return model_routing.get("NORMAL") or run_model or ""


def _key(model: str | None, home: str) -> str:
    return model or home


def _clock(ev: Mapping[str, Any], mem: Memory) -> float:
    t = event_time(ev.get("ts"))
    return t if t is not None else min(TS_MAX, float(mem["t"]) + PRIOR_CALL_S)


def _total(a: float, b: float) -> float:
    """A run's total plus one call's cost, saturating at COST_MAX. A cost that is not a number
    >= 0 can come only from prices built in code, not read from a table: inf or NaN (an
    overflow) saturates, a negative one adds nothing."""
    if b <= 0:
        return a
    total = a + b
    return total if total <= COST_MAX else COST_MAX  # NaN compares false: saturates too


def _role(model: str, home: str, model_routing: Mapping[str, str]) -> str:
    if model == home:
        return "NORMAL"
    return next((s for s in ROUTED_STATES if model_routing.get(s) == model), "NORMAL")


def observe(
    mem: Memory,
    ev: Mapping[str, Any],
    model_routing: Mapping[str, str],
    run_model: str | None,
    prices: PriceTable,
) -> Memory:
    """The memory after step `ev` (the call the last decision routed): the model that served
    it (a step's `served_model`, else the one named), its cache, the context's growth, and
    the call's estimated cost routed and never switching (`cost`, `base`)."""
    home = home_of(model_routing, run_model)
    mem = {**mem, "used": dict(mem["used"]), "stints": list(mem["stints"])}
    served = ev.get("served_model")
    on = served if isinstance(served, str) and served else (mem["on"] or home)
    out, obs = step_tokens(ev)
    usage = _usage_tokens(ev)
    if usage is not None and usage[1]:
        out = usage[1]
    n_in = float(usage[0]) if usage is not None and usage[0] else float(mem["ctx"])
    p_on, priced_on = price_of(on, _role(on, home, model_routing), run_model, prices)
    p_home, priced_home = price_of(home, "NORMAL", run_model, prices)
    mem["cost"] = _total(
        mem.get("cost", 0.0), _calls_cost(p_on, 1, n_in, 0.0, _warm(mem, on, mem["t"], p_on.ttl_s), out)
    )
    b = mem.get("b")
    warm_b = int(b[1]) if b is not None and mem["t"] - b[0] < p_home.ttl_s else 0
    mem["base"] = _total(mem.get("base", 0.0), _calls_cost(p_home, 1, n_in, 0.0, warm_b, out))
    mem["b"] = [mem["t"], n_in]
    mem["dollars"] = bool(mem.get("dollars", True) and priced_on and priced_home)
    # the call started when the decision went out (the last event's time) with ctx as input
    mem["used"][on] = [mem["t"], n_in]
    if len(mem["used"]) > 5:  # keep the newest five models
        mem["used"] = dict(sorted(mem["used"].items(), key=lambda kv: kv[1][0])[-5:])
    ctx = int(n_in)
    tokens = ev.get("tokens")
    if usage is None and isinstance(tokens, int) and tokens > ctx:
        ctx = tokens  # a call's total tokens: at least the input it read
    mem["ctx"] = min(TOKENS_MAX, ctx + out + obs)
    mem["out"] = min(TOKENS_MAX, mem["out"] + out)
    mem["calls"] = min(COUNT_MAX, mem["calls"] + 1)
    mem["t"] = _clock(ev, mem)
    mem["on"] = on
    return mem


def _warm(mem: Memory, model: str, at: float, ttl: float) -> int:
    """Tokens of `model`'s cache still readable at time `at` (0: cold)."""
    u = mem["used"].get(model)
    if u is None or at - u[0] >= ttl:
        return 0
    return int(u[1])


def _calls_cost(p: ModelPrice, calls: int, n_in: float, d: float, warm: float, o: float) -> float:
    """`calls` calls in a row on one model: the first reads what is warm and writes the rest,
    each later one reads the one before and writes what was added (`d`)."""
    if calls <= 0:
        return 0.0
    cached = min(n_in, warm)
    first = p.cache_read * cached + p.cache_write * (n_in - cached) + p.output * o
    k = calls - 1
    rest = k * (p.cache_write * d + p.output * o) + p.cache_read * (k * n_in + d * k * (k - 1) / 2)
    return (first + rest) / 1e6


@dataclass(frozen=True, slots=True)
class Plans:
    stay: float  # the home model for the stint and the call after it
    switch: float  # the routed model for the stint, then back home
    write: float  # the cache writes the switch causes (cold start there, catch-up back home)
    stint: int


def compare(
    mem: Memory, home: str, target: str, p_home: ModelPrice, p_target: ModelPrice, stint: int
) -> Plans:
    """Both plans' expected cost over the expected stint, from the run's own figures."""
    calls = max(1, mem["calls"])
    n = float(mem["ctx"])
    d = max(0.0, (n - mem["ctx0"]) / calls)
    o = mem["out"] / calls
    dt = (mem["t"] - mem["t0"]) / calls if mem["calls"] else PRIOR_CALL_S
    now = mem["t"]
    warm_home = _warm(mem, home, now, p_home.ttl_s)
    during = _calls_cost(p_home, stint, n, d, warm_home, o)
    after = _calls_cost(p_home, stint + 1, n, d, warm_home, o) - during
    w = RETURN_WEIGHT  # the call after the stint happens only if the run goes on
    stay = during + w * after
    warm_target = _warm(mem, target, now, p_target.ttl_s)
    back = now + stint * dt
    warm_back = _warm(mem, home, back, p_home.ttl_s) if home != target else 0
    on_target = _calls_cost(p_target, stint, n, d, warm_target, o)
    n_back = n + stint * d
    return_call = _calls_cost(p_home, 1, n_back, d, warm_back, o)
    # cache writes the switch causes beyond staying: there (cold part) and back (missed part)
    write = (
        p_target.cache_write * (n - min(n, warm_target))
        + p_home.cache_write * (n_back - min(n_back, warm_back))
        - p_home.cache_write * (d * (stint + 1))
    ) / 1e6
    return Plans(stay, on_target + w * return_call, max(0.0, write), stint)


def expected_stint(mem: Memory) -> int:
    """Calls left in this FAST stint: the run's finished stints' mean (or the prior) less the
    calls this one has had, but at least as many as it has had: stints are heavy-tailed (on
    the dev runs, a stint that lasted k calls lasts about k more), so an old one is not
    about to end."""
    done, calls = mem["stints"]
    cur = int(mem["cur"])
    mean = float(calls) / float(done) if done else float(PRIOR_STINT_CALLS)
    return max(1, math.ceil(mean - cur), cur)


def _fmt(x: float, dollars: bool) -> str:
    return f"${x:.4f}" if dollars else f"{x * 1e6:.0f} units (prior: the run model's input token = 1)"


def route(
    mem: Memory,
    state: str,
    ev: Mapping[str, Any] | None,
    model_routing: Mapping[str, str],
    run_model: str | None,
    prices: PriceTable,
    cross_provider_tool_switch: bool = False,
) -> tuple[Routed, Memory]:
    """The model the decision in `state` names, why, and the memory after it."""
    home = home_of(model_routing, run_model)
    mem = {**mem, "stints": list(mem["stints"])}
    if state not in ROUTED_STATES:
        return Routed(None, "none", f"none: no routing in {state}"), mem
    # the run's own FAST stints: counted on the FSM's states, whatever model they got
    if state == "FAST":
        stint = expected_stint(mem)
        mem["cur"] += 1
    else:
        stint = PRIOR_STINT_CALLS
        if mem["cur"]:
            mem["stints"] = [mem["stints"][0] + 1, mem["stints"][1] + mem["cur"]]
            mem["cur"] = 0
    wanted = model_routing.get(state)
    target = _key(wanted, home)
    on = mem["on"] or home
    p_home, priced_home = price_of(home, "NORMAL", run_model, prices) if home else (PRIOR_UNIT, False)
    p_target, priced_target = price_of(target, state, run_model, prices) if target else (PRIOR_UNIT, False)
    dollars = priced_home and priced_target
    if target == home:
        code = "same" if on == home else "return"
        if code == "return":
            warm = _warm(mem, home, mem["t"], p_home.ttl_s)
            why = f"return: {state} routes back to {home or 'the run model'} (cache {'warm' if warm else 'cold'})"
        else:
            why = f"same: {state} routes to {home or 'the run model'}, which serves already"
        named: str | None = wanted
    elif p_target.input >= p_home.input:
        code = "same" if on == target else "upgrade"
        named = wanted
        why = (
            f"upgrade: {state} routes to {target}, dearer than {home or 'the run model'} (spending by design)"
            if code == "upgrade"
            else f"same: {state} routes to {target}, which serves already"
        )
    else:
        plans = compare(mem, home, target, p_home, p_target, stint)
        saving = plans.stay - plans.switch
        if saving > 0:
            code = "same" if on == target else "downgrade"
            named = wanted
            verb = "stays on" if on == target else "switches to"
        else:
            code, named, verb = "declined", model_routing.get("NORMAL"), "keeps"
            if on == target:
                code = "return"
        shown = target if code in ("same", "downgrade") else (home or "the run model")
        why = (
            f"{code}: {state} {verb} {shown}: ~{plans.stint} call(s) at ~{int(mem['ctx'])} tokens cost "
            f"{_fmt(plans.switch, dollars)} switched vs {_fmt(plans.stay, dollars)} staying "
            f"(switch's cache writes {_fmt(plans.write, dollars)})"
        )
    chosen = _key(named, home)
    if chosen != on and ev is not None and ev.get("action") and not cross_provider_tool_switch:
        a, b = provider_of(on, prices) if on else None, provider_of(chosen, prices) if chosen else None
        if a and b and a != b:
            named = None if on == home else on
            if named is None and model_routing.get("NORMAL"):
                named = model_routing["NORMAL"]
            why = f"held: stays on {on} ({a}) in the middle of a tool exchange; {b} after it ({code} wanted)"
            code, chosen = "held", on
    if chosen != on:
        mem["switches"] += 1
    if code == "upgrade":
        mem["upgrades"] += 1
    mem["on"] = chosen
    return Routed(named, code, why[:REASON_MAX]), mem


def settle(mem: Memory, named: str | None, routed: Routed, home: str) -> tuple[Routed, Memory]:
    """The decision as sent may name another model than routing did (the escalation ladder's):
    the memory follows what was named."""
    if named == routed.model:
        return routed, mem
    chosen = _key(named, home)
    if chosen != mem["on"]:
        mem = {**mem, "on": chosen, "switches": mem["switches"] + 1}
    return Routed(named, "escalate", f"escalate: the escalation ladder routes to {chosen}"[:REASON_MAX]), mem
