"""`service_nursery` itself: the block's own exception comes out as itself, never hidden.

`open_runtime`, `open_agent`, the SQLite store and the chat rely on it (D21); these tests pin
the helper's cases without any of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from trio_agents._nursery import service_nursery

Block = Callable[[trio.Nursery], Awaitable[None]]


async def _run(service: Callable[[], Awaitable[None]], block: Block) -> None:
    async with service_nursery() as nursery:
        nursery.start_soon(service)
        await block(nursery)


def _raising(exc: BaseException) -> Block:
    async def block(nursery: trio.Nursery) -> None:
        # Once the service has blocked, so that a service failing on cancellation fails.
        await trio.testing.wait_all_tasks_blocked()
        raise exc

    return block


async def _fail_when_cancelled() -> None:
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        raise RuntimeError("the service failed while closing") from None


async def _fail_now() -> None:
    await trio.lowlevel.checkpoint()
    raise RuntimeError("the service failed")


async def _forever(nursery: trio.Nursery) -> None:
    await trio.sleep_forever()


async def test_the_blocks_exception_comes_out_as_itself() -> None:
    body = ValueError("from the block")
    with pytest.raises(ValueError, match="from the block") as caught:
        await _run(trio.sleep_forever, _raising(body))
    assert caught.value is body


async def test_a_block_that_returns_leaves_the_nursery_cleanly() -> None:
    ran: list[str] = []

    async def service() -> None:
        ran.append("service")
        await trio.lowlevel.checkpoint()

    async def block(nursery: trio.Nursery) -> None:
        await trio.testing.wait_all_tasks_blocked()

    await _run(service, block)
    assert ran == ["service"]


async def test_a_service_failing_as_well_comes_out_as_the_group_of_both() -> None:
    body = ValueError("from the block")
    with pytest.raises(ExceptionGroup) as caught:
        await _run(_fail_when_cancelled, _raising(body))
    leaves = caught.value.exceptions
    assert len(leaves) == 2
    assert body in leaves
    assert any(isinstance(leaf, RuntimeError) for leaf in leaves)


async def test_a_service_failing_alone_comes_out_as_the_nurserys_group() -> None:
    # The block is cancelled by the failure: its Cancelled is recorded and absorbed, and the
    # group holding the service's error is not mistaken for the block's.
    with pytest.raises(ExceptionGroup) as caught:
        await _run(_fail_now, _forever)
    (leaf,) = caught.value.exceptions
    assert isinstance(leaf, RuntimeError)
    assert str(leaf) == "the service failed"


async def test_an_exception_group_the_block_raises_comes_out_as_itself() -> None:
    # The block's exception cancels the nursery's scope, so trio splits Cancelled out of the
    # group and re-raises a copy of it: it is recognised by its message and the identity of
    # its leaves, and the block's own group comes out.
    body = ExceptionGroup("two at once", [ValueError("a"), KeyError("b")])
    with pytest.raises(ExceptionGroup) as caught:
        await _run(trio.sleep_forever, _raising(body))
    assert caught.value is body
