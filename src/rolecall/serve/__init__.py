"""rolecall served to other programs: ``rolecall serve --mcp`` (docs/compare.md)."""
