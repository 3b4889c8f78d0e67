"""A plain Anthropic-style messages loop steered by `SteeringSession` (no framework).

    .venv/bin/python -m examples.messages_loop [--port 9092]

`call_model` stands in for `anthropic.Anthropic().messages.create(**request)`: it answers
from a script, so no API key is needed, but the request it gets is exactly what the real
API would get: the caller's `system` and history unchanged (the provider's cached prefix), the
[REASONBLOCKS] block at the end of the last user turn when steering injects, and the routed
`model`.
"""

from __future__ import annotations

import argparse
from typing import Any

from examples._local import local_stack
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import REASONBLOCKS_MARKER as MARKER
from streams.agent.compose import body_of
from streams.agent.session import SteeringSession

BASE = "You are a support agent that answers questions from the product documentation."
SCRIPT = [
    ("Search the docs for the refund policy.", "search_docs", {"query": "refund policy"}, "No results."),
    (
        "Search the docs for the refund policy again.",
        "search_docs",
        {"query": "refund policy"},
        "No results.",
    ),
    (
        "Search the docs for the refund policy once more.",
        "search_docs",
        {"query": "refund policy"},
        "No results.",
    ),
    ("Search the docs for refund policy.", "search_docs", {"query": "refund policy"}, "No results."),
    ("Open the billing FAQ instead.", "open_page", {"page": "billing-faq"}, "Refunds within 30 days."),
    ("Refunds are possible within 30 days (billing FAQ).", None, None, None),
]


def call_model(request: dict[str, Any], k: int) -> dict[str, Any]:
    thought, tool, args, _ = SCRIPT[k - 1]
    return {"model": request["model"], "text": thought, "tool": tool, "input": args, "usage": 350 + 40 * k}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Can I get a refund after two weeks?"}]
    with local_stack(args.port) as settings, SyncSteeringClient(settings) as client:
        session = SteeringSession(
            client,
            model="claude-sonnet-4-5",
            model_routing={"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"},
            task=messages[0]["content"],
            task_profile="qa",
            org_id="acme",
        )
        with session:  # run_start now; run_finish at the end (failure: <Type> if this raises)
            for k in range(1, len(SCRIPT) + 1):
                steer = session.begin_step()
                request = steer.request(
                    {"model": session.model, "max_tokens": 1024, "system": BASE, "messages": messages}
                )
                # the steering block ends the last user turn; system and history are as sent
                last = request["messages"][-1]["content"]
                blocks = last if isinstance(last, list) else []
                extra = [
                    body_of(b["text"]).splitlines()[0][:110]
                    for b in blocks
                    if b["text"].startswith(MARKER[:-1])
                ]
                print(f"call {k}: model {request['model']:<18} steering blocks {len(extra)} {extra or ''}")
                resp = call_model(request, k)
                messages = [*messages, {"role": "assistant", "content": resp["text"]}]
                observation = SCRIPT[k - 1][3]
                if resp["tool"] is None:
                    break
                messages = [*messages, {"role": "user", "content": f"[{resp['tool']}] {observation}"}]
                session.end_step(
                    thought=resp["text"],
                    action=resp["tool"],
                    action_input=resp["input"],
                    observation=observation,
                    tokens=resp["usage"],
                    model_id=resp["model"],
                )
        for e in session.step_log:
            print(
                f"  step {e.step}: {e.fsm_state:<6} fired {e.monitors_fired or '-'} injected {e.injection_sources or '-'} {e.latency_ms:.1f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
