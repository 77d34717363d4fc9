"""This package's async tests run on asyncio and trio (tests/backends.py)."""

from tests.backends import anyio_backend

__all__ = ["anyio_backend"]
