"""A reference engine for bench.scaleout: a quix-streams consumer-producer (bytes in, the same
bytes out, at-least-once), optionally writing each value (as text: its state
stores JSON values) to its state store first, as the
Faust pass-through (bench/passthrough.py) writes its table.

    python -m bench.quix_passthrough BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP STATE_DIR STATEFUL(0|1)

Needs only quixstreams (it runs in an interpreter of its own: its pins differ from the
worker's).
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from quixstreams import Application

    bootstrap, src, dst, group, state_dir, stateful = sys.argv[1:7]
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        processing_guarantee="at-least-once",
        loglevel="WARNING",
    )
    in_t = app.topic(src, key_deserializer="bytes", value_deserializer="bytes")
    out_t = app.topic(dst, key_serializer="bytes", value_serializer="bytes")
    sdf = app.dataframe(in_t)
    if stateful == "1":

        def keep(value: Any, state: Any) -> None:
            state.set("v", value.decode())  # its state stores JSON values, not bytes

        sdf = sdf.update(keep, stateful=True)
    sdf.to_topic(out_t)
    app.run()


if __name__ == "__main__":
    main()
