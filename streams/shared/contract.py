"""The wire contract both sides import: the schema version, the schemas, the decision's rungs
and the marker that opens a steering injection.

Standard library only (and fastjsonschema, imported when a schema is first checked), so that
the agent side (`streams.agent`, a client-only install) can read it without importing the
core; the core and the worker import it from here too, so there is one source of truth
(docs/wire-contract.md).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any, Literal, get_args

SCHEMA_VERSION = 1
EVENT_TYPES = ("run_start", "step", "run_finish")
# Maxima of the wire's integer fields (the schemas state the same numbers; a test checks).
STEP_MAX = 2**31 - 1
TOKENS_MAX = 2**53  # per step, per budget, and where a run's token sum saturates

# The line that opens the one block of injected advice (SPEC section 9): the agent side finds
# (and replaces) an earlier injection by it.
REASONBLOCKS_MARKER = "[REASONBLOCKS]"

# The escalation ladder's rung a decision asks for (docs/escalation.md): continue (no monitor
# injection), nudge (a monitor injection), escalate (the call goes to the escalation model),
# stop (end the run).
Action = Literal["continue", "nudge", "escalate", "stop"]
ACTIONS: tuple[Action, ...] = get_args(Action)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """`streams/schemas/<name>.schema.json`, parsed (cached: callers must not mutate it)."""
    text = resources.files("streams.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


# fastjsonschema's generated check lets integral floats through the "integer" type: removed
# (on our wire an integer field takes integers only).
_FLOAT_AS_INT = re.compile(r" and not \(isinstance\((\w+), float\) and \1\.is_integer\(\)\)")


@cache
def fast_validator(name: str, open_top: bool = False) -> Any:
    """A schema compiled to Python (~30x faster than jsonschema): the worker's hot-path yes/no
    check, and the client's check of a run_start before it is sent. Raises fastjsonschema's
    `JsonSchemaValueException` (its `message` says what is wrong).

    `open_top`: top-level properties the schema does not name are let through (what a reader
    checks with: a newer writer's optional field is no reason to refuse its record; every
    field the schema names is still checked)."""
    import fastjsonschema

    # without `$id`: the schemas' ids are relative names, against which fastjsonschema cannot
    # resolve a local `#/$defs/...` reference (the decision schema's)
    drop = {"$id", "additionalProperties"} if open_top else {"$id"}
    schema = {k: v for k, v in load_schema(name).items() if k not in drop}
    code = _FLOAT_AS_INT.sub("", fastjsonschema.compile_to_code(schema))
    if ".is_integer()" in code:  # a fastjsonschema release generates it differently: fail loudly
        raise RuntimeError(f"could not make {name}'s integer checks exact")
    func = re.search(r"^def (\w+)\(", code, re.M)
    assert func is not None
    namespace: dict[str, Any] = {}
    exec(compile(code, f"<{name}.schema.json>", "exec"), namespace)
    return namespace[func.group(1)]
