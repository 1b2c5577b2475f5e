"""The registry of task functions a worker can run, by task type name.

Applications register plain functions (``@task`` or ``register``) in a module
that ``taskscale worker --import MODULE`` imports; the worker then looks up
each claimed task's type here.  A type the worker serves but finds no
function for is dead-lettered with the reason, never dropped.

``@task("fetch", max_retries=5, timeout=30)`` also declares the type's
default options (:class:`taskscale.options.TaskOptions`); the worker applies
them to every run whose envelope does not set them.

An ``async def`` function is registered the same way; the worker runs it on
its event loop (``--async-slots``) instead of a thread (:meth:`TaskRegistry.is_async`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar, Unpack, overload

from taskscale.keys import check_name
from taskscale.options import TaskOptionArgs, TaskOptions

TaskFunction = Callable[..., Any]
F = TypeVar("F", bound=TaskFunction)


class TaskRegistry:
    """Task type name -> function."""

    def __init__(self) -> None:
        self._functions: dict[str, TaskFunction] = {}
        self._options: dict[str, TaskOptions] = {}

    def register(
        self, name: str, fn: TaskFunction, options: TaskOptions | None = None
    ) -> TaskFunction:
        """Register ``fn`` as task type ``name`` with default ``options``;
        re-registering the same function is harmless, another function under a
        taken name is an error."""
        check_name("task type", name)
        if not callable(fn):
            raise TypeError(f"task type {name!r}: {fn!r} is not a function")
        if options is not None and not isinstance(options, TaskOptions):
            raise TypeError(f"options must be a TaskOptions, not {type(options).__name__}")
        existing = self._functions.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"task type {name!r} is already registered to {existing!r}")
        self._functions[name] = fn
        if options is not None:
            self._options[name] = options
        return fn

    def get(self, name: str) -> TaskFunction | None:
        return self._functions.get(name)

    def options(self, name: str) -> TaskOptions | None:
        """The default options declared for ``name``, if any."""
        return self._options.get(name)

    def is_async(self, name: str) -> bool:
        """Whether ``name`` is registered to an ``async def`` function."""
        fn = self._functions.get(name)
        return fn is not None and inspect.iscoroutinefunction(fn)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def __contains__(self, name: object) -> bool:
        return name in self._functions


#: The process-wide registry ``taskscale worker`` uses.
registry = TaskRegistry()


def register(name: str, fn: TaskFunction, options: TaskOptions | None = None) -> TaskFunction:
    """Register ``fn`` as task type ``name`` in the process-wide registry."""
    return registry.register(name, fn, options)


@overload
def task(name_or_fn: F, /) -> F: ...
@overload
def task(
    name_or_fn: str | None = None, /, **options: Unpack[TaskOptionArgs]
) -> Callable[[F], F]: ...
def task(
    name_or_fn: str | F | None = None, /, **options: Unpack[TaskOptionArgs]
) -> F | Callable[[F], F]:
    """Decorator: ``@task`` (type = function name) or ``@task("email", ...)``
    with default options, the keywords being the fields of
    :class:`taskscale.options.TaskOptions` (``max_retries``, ``timeout``...)."""
    if callable(name_or_fn):
        fn = name_or_fn
        registry.register(fn.__name__, fn)
        return fn
    name = name_or_fn
    if name is not None:  # checked now, not when the decorated function is defined
        check_name("task type", name)
    declared = TaskOptions(**options)

    def decorate(fn: F) -> F:
        registry.register(name or fn.__name__, fn, declared)
        return fn

    return decorate
