"""A dataclass field's default, for the places that apply or show it again.

Why it exists: a settings dataclass states each default once, and other
places need the same number -- a command-line flag (``cli.common.add_setting``)
and the TaskScaler spec table (``controller.config.SPEC_FIELDS``).  They read
it here instead of restating it, so a changed default changes everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final


class _Required:
    """The default of a field that has none: it must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: What :func:`default_of` answers for a field without a default.
REQUIRED: Final = _Required()


def default_of(cls: type, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``cls`` (:data:`REQUIRED`
    when it has none); LookupError when ``cls`` has no such field."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            return REQUIRED
    raise LookupError(f"{cls.__name__} has no field {name!r}")
