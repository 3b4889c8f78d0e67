"""The throughput baseline: a pass-through Faust agent (consume, update a table, produce)
with the same app settings as the worker, minus the steering logic.

    python -m bench.passthrough BOOTSTRAP IN_TOPIC OUT_TOPIC APP_ID DATA_DIR PARTITIONS WEB_PORT
"""

from __future__ import annotations

import sys

import faust

from streams.worker.app import PRODUCER_MAX_BATCH_BYTES


def main() -> None:
    bootstrap, src, dst, app_id, data_dir, partitions, web_port = sys.argv[1:8]
    n = int(partitions)
    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap}",
        store="rocksdb://",
        datadir=data_dir,
        web_port=int(web_port),
        web_host="127.0.0.1",
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        topic_partitions=n,
        key_serializer="raw",
        value_serializer="raw",
        producer_acks=-1,
        producer_max_batch_size=PRODUCER_MAX_BATCH_BYTES,
    )
    in_t = app.topic(src, partitions=n, key_serializer="raw", value_serializer="raw")
    out_t = app.topic(dst, partitions=n, key_serializer="raw", value_serializer="raw")
    table = app.Table("pt", partitions=n, key_type=bytes, value_type=bytes)

    @app.agent(in_t)
    async def passthrough(stream):  # type: ignore[no-untyped-def]
        async for event in stream.events():
            table[event.key] = event.value
            await out_t.send(key=event.key, value=event.value, partition=event.message.partition)

    worker = faust.Worker(app, loglevel="warn", quiet=True)
    sys.argv = sys.argv[:1]
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
