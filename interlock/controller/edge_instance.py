"""Noticing that the data plane at ``--edge-admin-url`` restarted, so that it is programmed again.

A data plane in another process (``interlock edge``) restarts on its own and comes back empty:
no route, no upstream table. Nothing in the controller changes meanwhile, so without a look at
the data plane nothing would program it again until the next Ingress or endpoint change.
:class:`InstanceWatch` asks it for its instance (``GET /v1/instance``: a name drawn when it
started) every :data:`CHECK_EVERY` seconds; a failed call is tried again after a delay that
doubles up to :data:`CHECK_AT_MOST`. Each instance seen is published on ``edge-instance``; every
EdgeActor programs its host again when it changes (it reads what the data plane serves, then
applies its routes), and ``restarted`` is called first (the upstream pusher sends the whole
table at once instead of waiting for its next ``PATCH`` to be refused).

A data plane older than the endpoint answers 404: the watch then stops, as before it existed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from loguru import logger

from interlock.actors.topics import EDGE_INSTANCE_TOPIC
from interlock.edge.http_provider import HttpEdge
from interlock.edge.provider import EdgeError, PermanentEdgeError

CHECK_EVERY = 5.0
"""Seconds between two looks at the data plane's instance while it answers."""

CHECK_AT_MOST = 60.0
"""The longest delay between two looks after failed ones (it doubles from :data:`CHECK_EVERY`)."""


class InstanceWatch:
    """Polls the data plane's instance and publishes it; see the module docstring."""

    def __init__(
        self,
        *,
        client: HttpEdge,
        publish: Callable[[str, str, object], None],
        restarted: Callable[[], Awaitable[None]],
        every: float = CHECK_EVERY,
        at_most: float = CHECK_AT_MOST,
    ) -> None:
        """``publish``: the actor system's (topic, key, value); ``restarted``: called when the
        instance changed, before the new one is published."""
        self._client = client
        self._publish = publish
        self._restarted = restarted
        self._every = every
        self._at_most = at_most
        self.instance: str | None = None
        """The instance last seen; None before the first answer."""
        self.restarts = 0
        """Changes of instance seen."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="edge: the data plane's instance"
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def check(self) -> None:
        """Look once; raises the call's :class:`EdgeError`."""
        instance = await self._client.instance()
        if instance == self.instance:
            return
        if self.instance is not None:
            self.restarts += 1
            logger.info("edge: the data plane restarted (a new instance); programming it again")
            await self._restarted()
        self.instance = instance
        self._publish(EDGE_INSTANCE_TOPIC, "instance", instance)

    async def _run(self) -> None:
        delay = self._every
        while True:
            try:
                await self.check()
            except PermanentEdgeError as error:
                logger.warning(
                    "edge: cannot tell when the data plane restarts ({}); its routes are "
                    "programmed again only when they change",
                    error.message,
                )
                return
            except EdgeError as error:
                delay = min(delay * 2, self._at_most)
                logger.debug("edge: the data plane's instance: {}", error.message)
            except Exception:  # a bug: logged, and the watch goes on
                delay = min(delay * 2, self._at_most)
                logger.exception("edge: reading the data plane's instance failed")
            else:
                delay = self._every
            await asyncio.sleep(delay)
