"""rolecall: a runtime for multi-role LLM dialogues."""

__version__ = "0.1.0"
