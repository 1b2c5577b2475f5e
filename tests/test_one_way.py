"""One way to do each thing (issue 20): a second copy of a shared helper fails here.

Each test scans taskscale/ with ``ast`` for the shape a copy would have, outside
the one module that owns the thing.  The behaviour of the shared helpers
themselves is tests/test_shared_helpers.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "taskscale"


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), str(path))


def _is_bytes_check(node: ast.expr) -> bool:
    """``isinstance(x, bytes)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Name)
        and node.args[1].id == "bytes"
    )


#: Where bytes -> str stays inline, and why.
INLINE_DECODE = {
    # envelope.decode runs once per claimed task: no extra call on the hot path
    "taskscale/envelope.py",
}


def test_bytes_become_text_in_one_helper() -> None:
    """``taskscale.text.as_text`` is the one bytes -> str helper: no module
    defines its own ``_text`` (twelve did) or inlines
    ``v.decode() if isinstance(v, bytes) else ...``."""
    copies = []
    for rel, tree in modules():
        if rel == "taskscale/text.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in ("_text", "text", "_str"):
                copies.append(f"{rel}:{node.lineno} def {node.name}")
            if (
                isinstance(node, ast.IfExp)
                and _is_bytes_check(node.test)
                and isinstance(node.body, ast.Call)
                and isinstance(node.body.func, ast.Attribute)
                and node.body.func.attr == "decode"
                and rel not in INLINE_DECODE
            ):
                copies.append(f"{rel}:{node.lineno} inline decode")
    assert copies == [], "use taskscale.text.as_text instead of: " + ", ".join(copies)


def imported_modules(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_tenacity_is_used_in_one_module() -> None:
    """Every tenacity policy is in taskscale/retrying.py (the runtime's and the
    controller's each had their own module)."""
    users = [
        rel
        for rel, tree in modules()
        if any(m == "tenacity" or m.startswith("tenacity.") for m in imported_modules(tree))
    ]
    assert users == ["taskscale/retrying.py"]


def test_an_exception_becomes_one_line_in_one_helper() -> None:
    """taskscale.errors.one_line is the one ``exception -> first line`` (four
    modules had their own ``str(exc).strip().splitlines()[0]``)."""
    copies = [
        f"{rel}:{node.lineno}"
        for rel, tree in modules()
        if rel != "taskscale/errors.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "splitlines"
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == 0
    ]
    assert copies == [], "use taskscale.errors.one_line instead of: " + ", ".join(copies)


def test_backoff_is_computed_in_one_module() -> None:
    """Every hand-written backoff uses taskscale.backoff: no ``x ** attempt``,
    no jitter from ``random`` and no ``min(delay * 2, cap)`` doubling anywhere
    else (the supervisor, the claimer, the reconciler, the demand listener,
    the TaskScaler watch and the task retry policy each had their own)."""
    copies = []
    for rel, tree in modules():
        if rel == "taskscale/backoff.py":
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Pow)
                and not isinstance(node.right, ast.Constant)
            ):
                copies.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "random"
                and node.attr in ("random", "uniform")
            ):
                copies.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "min"
                and any(
                    isinstance(arg, ast.BinOp)
                    and isinstance(arg.op, ast.Mult)
                    and any(
                        isinstance(side, ast.Constant) and side.value == 2
                        for side in (arg.left, arg.right)
                    )
                    for arg in node.args
                )
            ):
                copies.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert copies == [], "use taskscale.backoff instead of: " + ", ".join(copies)


#: The modules whose loops back off, each through taskscale.backoff.
BACKOFF_USERS = {
    "taskscale/worker/supervisor.py",  # restarting a crashed worker process
    "taskscale/worker/claimer.py",  # after a Redis error
    "taskscale/worker/execution.py",  # a failed task's retry
    "taskscale/worker/settings.py",  # the reconnect cap: a fraction of the lease
    "taskscale/controller/reconciler.py",  # a failed scaler's next pass
    "taskscale/controller/observer.py",  # the demand listener resubscribing
    "taskscale/controller/kube.py",  # the TaskScaler watch relisting
}


def test_the_loops_that_back_off_use_the_one_helper() -> None:
    users = {rel for rel, tree in modules() if "taskscale.backoff" in imported_modules(tree)}
    assert users == BACKOFF_USERS


def _reads_environ(node: ast.AST) -> ast.expr | None:
    """The key of ``os.environ.get(k)``, ``os.environ[k]``, ``os.getenv(k)`` or
    ``k in os.environ``; None for anything else."""

    def is_environ(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Attribute) and expr.attr == "environ"

    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and (
            (func.attr == "get" and is_environ(func.value)) or func.attr == "getenv"
        ):
            return node.args[0]
    if (
        isinstance(node, ast.Subscript)
        and is_environ(node.value)
        and isinstance(node.ctx, ast.Load)
    ):
        return node.slice
    if isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
        return node.left
    return None


#: Each variable the library and the command line share -> the one function
#: that reads it: (module, function, constant name, variable).
ONE_READER = [
    ("taskscale/connection.py", "redis_url_from_env", "REDIS_URL_ENV", "TASKSCALE_REDIS_URL"),
    ("taskscale/keys.py", "namespace_from_env", "NAMESPACE_ENV", "TASKSCALE_NAMESPACE"),
]


@pytest.mark.parametrize(("owner_module", "function", "constant", "variable"), ONE_READER)
def test_a_shared_variable_is_read_in_one_function(
    owner_module: str, function: str, constant: str, variable: str
) -> None:
    """TASKSCALE_REDIS_URL is read by connection.redis_url_from_env only and
    TASKSCALE_NAMESPACE by keys.namespace_from_env only (the command line,
    the library, the integrations each read them through those)."""
    readers = []
    for rel, tree in modules():
        owner = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef) and f.name == function
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            key = _reads_environ(node)
            if key is None or (rel == owner_module and id(node) in owner):
                continue
            if (isinstance(key, ast.Name) and key.id == constant) or (
                isinstance(key, ast.Constant) and key.value == variable
            ):
                readers.append(f"{rel}:{node.lineno}")
    assert readers == [], f"call {function} instead: " + ", ".join(readers)


#: Constructors of a redis-py client or pool.
CLIENT_CONSTRUCTORS = {"Redis", "StrictRedis", "RedisCluster", "Sentinel", "ConnectionPool"}


def _called_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = func.value
        if func.attr == "from_url" and isinstance(owner, ast.Attribute | ast.Name):
            return f"{owner.attr if isinstance(owner, ast.Attribute) else owner.id}.from_url"
        return func.attr
    return ""


def test_redis_clients_are_built_in_one_place() -> None:
    """Every client is built by taskscale/redis_urls.py, reached through
    connection.connect() (or node_client, a copy of a client's settings): no
    module makes its own ``redis.Redis(...)``, ``Redis.from_url(...)``,
    cluster, sentinel or pool, nor calls ``build_client`` around connect()."""
    others = []
    for rel, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            constructs = name in CLIENT_CONSTRUCTORS or name.endswith(".from_url")
            if constructs and rel != "taskscale/redis_urls.py":
                others.append(f"{rel}:{node.lineno} {name}")
            if name == "build_client" and rel != "taskscale/connection.py":
                others.append(f"{rel}:{node.lineno} {name}")
    assert others == [], "use taskscale.connection.connect instead of: " + ", ".join(others)
