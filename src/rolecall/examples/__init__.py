"""Small programs shipped to show rolecall's seams (tools.md): an MCP server, Python tools."""
