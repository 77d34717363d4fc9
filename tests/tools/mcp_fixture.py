"""An MCP server for the tests' bad cases, built with the official SDK:
``python -m tests.tools.mcp_fixture`` (stdio).

``echo`` answers its text; ``sleep`` waits (a tool that hangs past its timeout);
``big`` returns a text of ``chars`` characters (a 1 MB result); ``crash`` ends the
server's process in the middle of the call (a server that dies mid-session); ``mark``
appends a line to a file (which calls ran); ``env`` says which environment variables the server got;
``parent`` gives the id of the process that started the server (which machine's process ran it).
"""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("fixture")


@server.tool()
def echo(text: str) -> str:
    """The text, as given."""
    return text


@server.tool()
def sleep(seconds: float) -> str:
    """Wait this many seconds, then say so."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def big(chars: int) -> str:
    """A text of this many characters."""
    return "x" * chars


@server.tool()
def mark(path: str, text: str) -> str:
    """Append a line to a file (so a test can count the calls that ran)."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(text + "\n")
    return f"marked {text}"


@server.tool()
def crash() -> str:
    """End this server's process at once."""
    os._exit(3)


@server.tool()
def env() -> str:
    """The names of the environment variables this server has, sorted."""
    return " ".join(sorted(os.environ))


@server.tool()
def parent() -> str:
    """The process id of the process that started this server."""
    return str(os.getppid())


if __name__ == "__main__":
    server.run()
