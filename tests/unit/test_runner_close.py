"""A run that is closing finishes closing when Ctrl-C comes meanwhile: its services stop and its end
is recorded (asyncio.run answers a first Ctrl-C by cancelling the main task; a second one raises
KeyboardInterrupt and stops hard).

Imports a private module: `treegrpo.runner._lifecycle` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import asyncio

import pytest

from treegrpo.runner._lifecycle import uninterrupted

pytestmark = pytest.mark.timeout(30)


async def _closing(steps: list[str]) -> bool:
    await asyncio.sleep(0.2)
    steps.append("services stopped")
    await asyncio.sleep(0.2)
    steps.append("end recorded")
    return True


async def test_a_cancel_while_the_run_closes_lets_the_closing_finish():
    steps: list[str] = []
    task = asyncio.create_task(uninterrupted(_closing(steps)))
    await asyncio.sleep(0.05)
    task.cancel()  # Ctrl-C while the services stop
    await asyncio.sleep(0.25)
    task.cancel()  # and again while the end is recorded
    assert await task == (True, True)
    assert steps == ["services stopped", "end recorded"]


async def test_a_closing_nobody_interrupts_says_so():
    steps: list[str] = []
    assert await uninterrupted(_closing(steps)) == (True, False)
    assert steps == ["services stopped", "end recorded"]


async def test_a_closing_that_is_itself_cancelled_is_not_waited_for_forever():
    async def cancelled_inside() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(uninterrupted(cancelled_inside()), 5)


async def test_an_error_while_closing_reaches_the_caller():
    async def broken() -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        await uninterrupted(broken())
