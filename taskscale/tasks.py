"""The registry of task functions a worker can run, by task type name.

Applications register plain functions (``@task`` or ``register``) in a module
that ``taskscale worker --import MODULE`` imports; the worker then looks up
each claimed task's type here.  A type the worker serves but finds no
function for is dead-lettered with the reason, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from taskscale.keys import check_name

TaskFunction = Callable[..., Any]
F = TypeVar("F", bound=TaskFunction)


class TaskRegistry:
    """Task type name -> function."""

    def __init__(self) -> None:
        self._functions: dict[str, TaskFunction] = {}

    def register(self, name: str, fn: TaskFunction) -> TaskFunction:
        """Register ``fn`` as task type ``name``; re-registering the same
        function is harmless, another function under a taken name is an error."""
        check_name("task type", name)
        existing = self._functions.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"task type {name!r} is already registered to {existing!r}")
        self._functions[name] = fn
        return fn

    def get(self, name: str) -> TaskFunction | None:
        return self._functions.get(name)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def __contains__(self, name: object) -> bool:
        return name in self._functions


#: The process-wide registry ``taskscale worker`` uses.
registry = TaskRegistry()


def register(name: str, fn: TaskFunction) -> TaskFunction:
    """Register ``fn`` as task type ``name`` in the process-wide registry."""
    return registry.register(name, fn)


@overload
def task(name_or_fn: F, /) -> F: ...
@overload
def task(name_or_fn: str | None = None, /) -> Callable[[F], F]: ...
def task(name_or_fn: str | F | None = None, /) -> F | Callable[[F], F]:
    """Decorator: ``@task`` (type = function name) or ``@task("email")``."""
    if callable(name_or_fn):
        fn = name_or_fn
        registry.register(fn.__name__, fn)
        return fn
    name = name_or_fn

    def decorate(fn: F) -> F:
        registry.register(name or fn.__name__, fn)
        return fn

    return decorate
