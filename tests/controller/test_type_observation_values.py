"""TypeObservation.from_values (the observer's fast constructor) makes the
very object the dataclass constructor makes: equal, hashable, frozen."""

from __future__ import annotations

import dataclasses

import pytest

from taskscale.controller.types import TypeObservation


def test_from_values_is_the_constructor_without_its_cost() -> None:
    names = [f.name for f in dataclasses.fields(TypeObservation)]
    values = ["mail", *range(1, len(names))]
    built = TypeObservation(**dict(zip(names, values, strict=True)))  # type: ignore[arg-type]

    fast = TypeObservation.from_values(values)

    assert fast == built and hash(fast) == hash(built)
    assert dataclasses.replace(fast, queued=0) == dataclasses.replace(built, queued=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.queued = 5  # type: ignore[misc]


@pytest.mark.parametrize("cut", [1, -1])
def test_from_values_refuses_a_row_of_another_length(cut: int) -> None:
    names = [f.name for f in dataclasses.fields(TypeObservation)]
    values: list[object] = ["mail", *range(1, len(names))]
    values = values[:-1] if cut == 1 else [*values, 0]
    with pytest.raises(ValueError):
        TypeObservation.from_values(values)


def test_from_fields_is_the_constructor_without_its_cost() -> None:
    names = [f.name for f in dataclasses.fields(TypeObservation)]
    values = dict(zip(names, ["mail", *range(1, len(names))], strict=True))
    built = TypeObservation(**values)  # type: ignore[arg-type]

    fast = TypeObservation.from_fields(dict(values))

    assert fast == built and hash(fast) == hash(built) and repr(fast) == repr(built)
    assert dataclasses.replace(fast, queued=0) == dataclasses.replace(built, queued=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.queued = 5  # type: ignore[misc]
