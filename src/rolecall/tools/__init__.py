"""Tools a role may call during its turn (tools.md): MCP servers, Python callables, built-ins."""
