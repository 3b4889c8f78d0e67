from __future__ import annotations

import asyncio

from streams.worker.chains import RunChains


def test_a_chain_is_forgotten_when_its_last_task_ends() -> None:
    async def go() -> None:
        chains = RunChains()
        gate = asyncio.Event()

        async def wait() -> None:
            await gate.wait()

        t = await chains.spawn(b"r", wait())
        assert chains.pending(b"r") is t and chains.pending(b"other") is None
        gate.set()
        await t
        await asyncio.sleep(0)
        assert chains.pending(b"r") is None and len(chains) == 0

    asyncio.run(go())


def test_spawning_waits_while_max_in_flight_tasks_are_alive() -> None:
    async def go() -> None:
        chains = RunChains(max_in_flight=2)
        gate = asyncio.Event()

        async def wait() -> None:
            await gate.wait()

        await chains.spawn(b"a", wait())
        await chains.spawn(b"b", wait())
        third = asyncio.ensure_future(chains.spawn(b"c", wait()))
        await asyncio.sleep(0.05)
        assert not third.done()  # backpressure: the partition's loop waits here
        gate.set()
        await asyncio.wait_for(third, 1)
        assert third.done()

    asyncio.run(go())
