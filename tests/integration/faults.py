"""Faults injected into a real worker process, for the poison tests: its own code fails, never
Kafka. Importing this module registers the fault transition (in the test process too, so
`Replayer` takes the same path); `main()` runs `rb-streams worker` with the faults named in
RB_TEST_FAULTS installed.

* transition and scorer `test-fault` (select them in run_start's `fsm_transition` and
  `scorer`): a step whose supplied difficulty is FAIL_EVALUATE makes the state machine raise
  inside the engine (stage evaluate); FAIL_ENCODE makes the scorer keep a memory no encoder can
  hold (an integer past 64 bits: stage encode).
* `send`: the decision of step 1 of runs named `sendfail-*` fails to send (stage send).
* `hang`: the run_start of runs named `hang-*` never finishes (a stage that never returns).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from streams.core.difficulty import ScorerMemory, get_step_scorer, register_step_scorer
from streams.core.fsm import FSMParams, FSMState, get_transition, register_transition

FAULT_TRANSITION = "test-fault"
FAIL_EVALUATE = 0.123
FAIL_ENCODE = 0.456
SEND_FAIL_PREFIX = "sendfail-"
HANG_PREFIX = "hang-"


@register_transition(FAULT_TRANSITION)
def _fault_transition(current: FSMState, history: Sequence[float], params: FSMParams) -> Any:
    if history and history[-1] == FAIL_EVALUATE:
        raise RuntimeError("injected fault in the state machine")
    return get_transition("default")(current, history, params)


def _fault_scorer(step: Any, memory: ScorerMemory, max_chars: int) -> tuple[float, ScorerMemory]:
    score, memory = get_step_scorer("trajectory")(step, memory, max_chars)
    if step.get("difficulty") == FAIL_ENCODE:
        return score, {**(memory or {}), "unencodable": 2**70}  # orjson cannot encode it
    return score, memory


register_step_scorer(FAULT_TRANSITION, _fault_scorer)


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


def main() -> int:
    install({f for f in os.environ.get("RB_TEST_FAULTS", "").split(",") if f})
    from streams.cli import main as cli_main

    return cli_main(["worker"])


if __name__ == "__main__":
    sys.exit(main())
