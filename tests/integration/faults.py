"""Faults injected into a real worker process, for the poison tests: its own code fails, never
Kafka. `main()` runs `rb-streams worker` with the faults named in RB_TEST_FAULTS installed.

* transition and scorer `test-fault` (select them in run_start's `fsm_transition` and
  `scorer`): a step whose supplied difficulty is FAIL_EVALUATE makes the state machine raise
  inside the engine (stage evaluate); FAIL_ENCODE makes the scorer keep a memory no encoder can
  hold (an integer past 64 bits: stage encode). The worker gets them as any deployment gets a
  transition or a scorer, from a plugin distribution on its PYTHONPATH (`plugin_dir`); the test
  process's `Replayer` from `POLICY`, the same Policy.
* `send`: the decision of step 1 of runs named `sendfail-*` fails to send (stage send).
* `hang`: the run_start of runs named `hang-*` never finishes (a stage that never returns).
* `slowetrace`: the E-trace answers of runs named `slow-*` take SLOW_ETRACE_S and are never
  ready ahead, so each of their decisions that needs them is finished off the agent loop and
  their next event waits behind it (what a slow pattern store does to a run).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from streams.core.difficulty import BUILTIN_SCORERS, ScorerMemory
from streams.core.fsm import BUILTIN_TRANSITIONS, FSMParams, FSMState
from streams.core.policy import Policy
from streams.core.reading.features import StepFeatures
from streams.plugins import SCORERS, TRANSITIONS
from tests.plugin_dist import write_dist

FAULT_TRANSITION = "test-fault"
FAIL_EVALUATE = 0.123
FAIL_ENCODE = 0.456
SEND_FAIL_PREFIX = "sendfail-"
HANG_PREFIX = "hang-"
SLOW_PREFIX = "slow-"
SLOW_ETRACE_S = 2.0


def fault_transition(current: FSMState, history: Sequence[float], params: FSMParams) -> Any:
    if history and history[-1] == FAIL_EVALUATE:
        raise RuntimeError("injected fault in the state machine")
    return BUILTIN_TRANSITIONS["default"](current, history, params)


def fault_scorer(step: StepFeatures, memory: ScorerMemory) -> tuple[float, ScorerMemory]:
    score, memory = BUILTIN_SCORERS["trajectory"](step, memory)
    if step.difficulty == FAIL_ENCODE:
        return score, {**(memory or {}), "unencodable": 2**70}  # orjson cannot encode it
    return score, memory


# what the worker loads
POLICY = (
    Policy().with_transition(FAULT_TRANSITION, fault_transition).with_scorer(FAULT_TRANSITION, fault_scorer)
)


def plugin_dir(root: Path) -> Path:
    """A directory holding a distribution whose `rb_streams.transitions` and `rb_streams.scorers`
    entry points are the faults: on a worker's PYTHONPATH, its Policy is `POLICY`."""
    write_dist(
        root,
        {
            TRANSITIONS: {FAULT_TRANSITION: "tests.integration.faults:fault_transition"},
            SCORERS: {FAULT_TRANSITION: "tests.integration.faults:fault_scorer"},
        },
        name="rb_test_faults",
    )
    return root


def install(faults: set[str]) -> None:
    from streams.worker.app import Worker
    from streams.worker.processor import Processor

    if "send" in faults:
        init = Worker.__init__

        def init_with_failing_send(self: Worker, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            send = self.topics.steering.send

            async def failing_send(*a: Any, **kw: Any) -> Any:
                key, value = kw.get("key") or b"", kw.get("value") or b"{}"
                if key.startswith(SEND_FAIL_PREFIX.encode()) and orjson.loads(value).get("step") == 1:
                    raise RuntimeError("injected producer failure")
                return await send(*a, **kw)

            self.topics.steering.send = failing_send  # type: ignore[method-assign]

        Worker.__init__ = init_with_failing_send  # type: ignore[method-assign]
    if "hang" in faults:
        conclude = Processor._conclude

        async def hanging_conclude(self: Processor, job: Any, result: Any) -> None:
            if (job.run_id or "").startswith(HANG_PREFIX):
                await asyncio.Event().wait()  # never set
            await conclude(self, job, result)

        Processor._conclude = hanging_conclude  # type: ignore[method-assign]
    if "slowetrace" in faults:
        from streams.etraces.retrieval import Retriever

        ready, answer = Retriever.ready, Retriever.answer

        def slow_ready(self: Retriever, key: Any, plan: Any) -> bool:
            return False if str(key).startswith(SLOW_PREFIX) else ready(self, key, plan)

        async def slow_answer(self: Retriever, plan: Any, key: Any = None) -> Any:
            if str(key).startswith(SLOW_PREFIX):
                await asyncio.sleep(SLOW_ETRACE_S)
            return await answer(self, plan, key)

        Retriever.ready = slow_ready  # type: ignore[method-assign]
        Retriever.answer = slow_answer  # type: ignore[method-assign]


def main() -> int:
    install({f for f in os.environ.get("RB_TEST_FAULTS", "").split(",") if f})
    from streams.cli.main import main as cli_main

    return cli_main(["worker"])


if __name__ == "__main__":
    sys.exit(main())
