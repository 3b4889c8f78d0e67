"""A stand-in for `SyncSteeringClient` that answers from a script of decisions (no broker, no
worker): what the agent side does with a decision, tested on its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams.agent.client import Decision, StepLogEntry

Answer = Callable[[int], dict[str, Any] | None]


def decision(step: int, **fields: Any) -> dict[str, Any]:
    """A decision dict as a worker sends it (only what the agent side reads)."""
    return {"run_id": "r", "step": step, "fsm_state": "NORMAL", "inject": False, "model": None, **fields}


def stop(
    step: int, text: str = "You were warned at step 2 and ran the same call again at steps 3, 4."
) -> dict[str, Any]:
    reason = {"monitor": "semantic_loop", "failure_type": "loop", "ignored": 2, "steps": [3, 4], "text": text}
    return decision(
        step, action="stop", action_reason=reason, inject=True, injection_text=f"[REASONBLOCKS]\n{text}"
    )


class FakeClient:
    """Records every event; `answer(step)` gives decision `step` (None: late)."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or (lambda k: decision(k))
        self.events: list[tuple[str, str, Any]] = []

    def _decide(self, step: int) -> Decision | None:
        data = self.answer(step)
        return Decision(data, 1.0) if data is not None else None

    def start_run(self, run_id: str, **fields: Any) -> Decision | None:
        self.events.append(("run_start", run_id, fields))
        return self._decide(0)

    def step(self, run_id: str, step: int, **fields: Any) -> Decision | None:
        self.events.append(("step", run_id, {"step": step, **fields}))
        return self._decide(step)

    def finish_run(self, run_id: str, outcome: str = "success") -> None:
        self.events.append(("run_finish", run_id, outcome))

    def step_log(self, run_id: str) -> list[StepLogEntry]:
        return []

    async def astart_run(self, run_id: str, **fields: Any) -> Decision | None:
        return self.start_run(run_id, **fields)

    async def astep(self, run_id: str, step: int, **fields: Any) -> Decision | None:
        return self.step(run_id, step, **fields)

    async def afinish_run(self, run_id: str, outcome: str = "success") -> None:
        self.finish_run(run_id, outcome)

    def kinds(self) -> list[str]:
        return [k if k != "step" else f"step {f['step']}" for k, _, f in self.events]

    def outcome(self) -> str | None:
        return next((f for k, _, f in reversed(self.events) if k == "run_finish"), None)


class EngineClient(FakeClient):
    """A stand-in whose decisions are the worker's own: every event goes through the core
    (`streams.replay.Replayer`, as the worker decides), no broker. `late`: the steps whose
    decision misses the deadline (computed by the worker, never handed back)."""

    def __init__(self, late: frozenset[int] = frozenset()) -> None:
        from streams.replay import Replayer
        from tests.models import semantics

        super().__init__()
        self.replayer = Replayer(sem=semantics(), clock=lambda: 1_767_225_600.0)
        self.late = late
        self.decisions: list[dict[str, Any]] = []  # every decision the core made, late ones too

    def _feed(self, event: dict[str, Any], step: int) -> Decision | None:
        import orjson

        data, dead = self.replayer.feed(orjson.dumps(event), key=event["run_id"].encode())
        assert dead is None and data is not None, dead
        self.decisions.append(dict(data))
        return None if step in self.late else Decision(dict(data), 1.0)

    def start_run(self, run_id: str, **fields: Any) -> Decision | None:
        from streams.shared.contract import SCHEMA_VERSION

        self.events.append(("run_start", run_id, fields))
        event = {"type": "run_start", "schema_version": SCHEMA_VERSION, "run_id": run_id, "ts": 1.0}
        event.update({k: v for k, v in fields.items() if v is not None})
        return self._feed(event, 0)

    def step(self, run_id: str, step: int, **fields: Any) -> Decision | None:
        from streams.agent.client import step_event

        self.events.append(("step", run_id, {"step": step, **fields}))
        event = step_event(run_id, step, **fields)
        event["ts"] = 1.0 + 2 * step
        return self._feed(event, step)


def sent(text: str, run_id: str = "r") -> str:
    """A decision's `[REASONBLOCKS]` text as the composer puts it in the request: its header
    carries the run's tag, and the line under it says what the tag means (issue 49)."""
    from streams.agent.compose import injection_of

    out = injection_of({"run_id": run_id, "injection_text": text})
    assert out is not None
    return out
