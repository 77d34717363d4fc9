"""The core's tests run on both of anyio's backends.

The pure core (flows, routing, the bus, chat, the presets, study, the runtime with the
offline and scripted models) is written against anyio only, so its tests run on asyncio
and on trio. What sits on an asyncio-only library (the SQLite store through aiosqlite,
the ``http`` client through aiohttp, NATS through nats-py, the web server) is tested on
asyncio, as conftest.py's default ``anyio_backend`` says.

A package's conftest.py imports ``anyio_backend`` from here to run its async tests on both.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
