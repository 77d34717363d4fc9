"""Secret values that no text leaving the process may show (logs, errors, the store).

A secret is the value of an environment variable whose name contains ``KEY``,
``TOKEN``, ``SECRET`` or ``PASSWORD`` (the keys litellm reads by itself, such as
``OPENAI_API_KEY``, and the variables worlds name in ``api_key_env``), at least 8
characters long (shorter values would redact ordinary words: a dummy key ``x`` for a
local server would turn ``OpenAIException`` into ``OpenAIE***ception``). The minimum
holds for every value, the ones passed in by name included.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
MIN_SECRET_LENGTH = 8


def secret_values(*extra: str | None) -> list[str]:
    """Values of secret-looking variables, and ``extra`` ones; longest first.

    Longest first, so that a key containing another is replaced whole.
    """
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k)}
    values.update(v for v in extra if v)
    values = {v for v in values if len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    for value in secrets:
        if value in text:
            text = text.replace(value, "***")
    return text
