"""The form for a task, generated from its catalog entry's parameters.

A parameter whose annotation is a simple type gets a typed input (number,
text, checkbox); anything else -- and ``*args`` / ``**kwargs`` -- a JSON
field.  Defaults are filled in (as JSON where the field is JSON).  The
browser turns the filled form back into ``args`` and ``kwargs``: positional
-only parameters and ``*args`` go to ``args``, the rest to ``kwargs``; an
empty optional field is left out so the function's default applies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: annotation text -> input kind
SIMPLE = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "int | None": "int",
    "float | None": "float",
    "str | None": "str",
}


@dataclass(frozen=True)
class Field:
    """One input of a task's form."""

    name: str
    label: str
    input: str  #: int, float, str, bool, json
    target: str  #: "kwarg", "arg" (positional), "args" (*args list), "kwargs" (**kwargs object)
    value: str  #: the prefilled value ("" for none)
    checked: bool
    required: bool
    hint: str


def fields(entry: dict[str, Any] | None) -> list[Field]:
    """The inputs for a catalog entry; ``[]`` when it has no known signature."""
    if not entry or not isinstance(entry.get("params"), list):
        return []
    out: list[Field] = []
    for p in entry["params"]:
        name, kind = str(p.get("name", "")), str(p.get("kind", ""))
        annotation = p.get("annotation")
        hint = str(annotation) if annotation else ""
        if kind == "var_positional":
            out.append(Field(name, f"*{name}", "json", "args", "[]", False, False, "JSON list"))
            continue
        if kind == "var_keyword":
            out.append(
                Field(name, f"**{name}", "json", "kwargs", "{}", False, False, "JSON object")
            )
            continue
        kind_input = SIMPLE.get(str(annotation), "json") if annotation else "json"
        has_default = "default" in p
        default = p.get("default")
        if kind_input == "bool" or not has_default:
            value = ""
        elif kind_input == "json":
            value = json.dumps(default)
        else:
            value = "" if default is None else str(default)
        out.append(
            Field(
                name=name,
                label=name,
                input=kind_input,
                target="arg" if kind == "positional_only" else "kwarg",
                value=value,
                checked=bool(default) if kind_input == "bool" else False,
                required=not has_default and "default_repr" not in p,
                hint=hint or "any JSON value",
            )
        )
    return out
