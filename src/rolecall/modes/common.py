"""Pieces shared by the debate and consensus presets."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from rolecall.modes.judge import Invalid, find_json_object

__all__ = ["validate_judgment"]

M = TypeVar("M", bound=BaseModel)


def validate_judgment(text: str, model: type[M]) -> M:
    """The judge's JSON object in ``text`` validated as ``model``.

    Raises :class:`~rolecall.modes.judge.Invalid` (``no JSON object found``, or the first
    validation error as ``field: message``) when it is missing or does not fit.
    """
    obj = find_json_object(text)
    if obj is None:
        raise Invalid("no JSON object found")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(object)"
        raise Invalid(f"{where}: {first['msg']}") from None
