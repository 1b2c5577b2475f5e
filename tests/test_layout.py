"""Rooms of a readable size, and no import circles (docs/architecture.md); in
the test suite, no test module leaning on another and one way to start
things (tests/support)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 450
#: Modules still over the limit, each with the line count it may not exceed
#: (a split is owed; the number may only go down).
OVER_LIMIT: dict[str, int] = {}


def python_files(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py"))


def test_modules_are_at_most_450_lines() -> None:
    too_long = {}
    for path in python_files("taskscale", "e2e", "tests", "bench"):
        rel = path.relative_to(REPO).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > OVER_LIMIT.get(rel, MAX_LINES):
            too_long[rel] = lines
    assert too_long == {}, f"split these modules (limit {MAX_LINES} lines): {too_long}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, package: str) -> set[str]:
    """Every module of ``package`` that ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found.update(n for n in names if n == package or n.startswith(package + "."))
    return found


def cycles(package: str, folder: str = "") -> list[list[str]]:
    """Import cycles among the modules of ``package`` (in ``folder``, the
    package's own path under the repository unless given)."""
    base = REPO / (folder or package.replace(".", "/"))
    modules = {
        ".".join([package, *p.relative_to(base).with_suffix("").parts]).removesuffix(".__init__"): p
        for p in python_files(folder or package.replace(".", "/"))
    }
    graph = {
        name: {m for m in imports(path, package) if m in modules and m != name}
        for name, path in modules.items()
    }
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


def test_taskscale_has_no_import_cycle() -> None:
    # The package's __init__ re-exports the producer API; a module importing
    # ``taskscale`` itself for __version__ is not a cycle of design.
    found = [c for c in cycles("taskscale") if "taskscale" not in c]
    assert found == []


def test_the_test_cluster_has_no_import_cycle() -> None:
    assert cycles("e2e") == []


def test_the_benchmarks_have_no_import_cycle() -> None:
    assert cycles("bench") == []


def test_the_tests_support_package_has_no_import_cycle() -> None:
    # imported as ``support`` (tests/conftest.py puts tests/ on sys.path)
    assert cycles("support", "tests/support") == []


TESTS = REPO / "tests"


def test_no_test_module_imports_another() -> None:
    # what two test modules share belongs in tests/support, which imports no
    # test module either: a test module is collected, never a library
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    offenders = {}
    for path in python_files("tests"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
        found = sorted(n for n in names if n.rpartition(".")[2] in test_modules)
        if found:
            offenders[path.relative_to(REPO).as_posix()] = found
    assert offenders == {}


def test_the_modules_beside_the_tests_have_names_of_their_own() -> None:
    # every test folder is on a worker subprocess's PYTHONPATH (and on
    # pytest's sys.path): two modules of one name would shadow each other
    by_name: dict[str, list[str]] = {}
    for path in python_files("tests"):
        rel = path.relative_to(TESTS)
        if rel.parts[0] == "support" or path.name in ("conftest.py", "__init__.py"):
            continue
        by_name.setdefault(path.stem, []).append(rel.as_posix())
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
    assert "support" not in by_name  # the package must not be shadowed either


#: The one way to start and wait for things in the tests (tests/support).
ONE_WAY = {
    "wait_until",
    "start_worker",
    "start_scheduler",
    "running_worker",
    "running_scheduler",
    "taskscale_process",
    "run_taskscale",
    "process_env",
    "pythonpath",
}
#: Tests that run ``python -m taskscale.cli`` themselves, and why the
#: support helpers (which set the test's Redis, namespace and PYTHONPATH)
#: would defeat the point.
OWN_COMMAND_LINE = {
    "tests/worker/test_worker_logs.py": "the command line alone, --redis-url, no environment",
    "tests/cli/test_input_errors.py": "a dead --redis-url must be the only Redis it sees",
    "tests/topology/test_connections.py": "a URL in a bare environment (PATH only)",
    "tests/demo/test_demo.py": "the demo starts its own Redis, in a temporary directory",
    "tests/dashboard/test_demo_dashboard.py": "the demo starts its own Redis",
    "tests/kube/test_drain_node.py": "the worker runs in a pod: the container's command line",
}


def test_the_tests_start_workers_and_wait_one_way() -> None:
    redefined = {}
    own_command = set()
    for path in python_files("tests"):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("tests/support/") or path == Path(__file__).resolve():
            continue
        tree = ast.parse(path.read_text())
        defined = {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in ONE_WAY
        }
        if defined:
            redefined[rel] = sorted(defined)
        if '"-m", "taskscale.cli"' in path.read_text():
            own_command.add(rel)
    assert redefined == {}, "use tests/support/workers.py and support/waiting.py"
    assert own_command == set(OWN_COMMAND_LINE), "start taskscale with support.workers"


def test_the_runtime_never_imports_the_controller() -> None:
    # the demo runs the controller's reconcile loop on one machine
    runtime = [p for p in python_files("taskscale") if not {"controller", "demo"} & set(p.parts)]
    offenders = {
        module_name(p): sorted(m for m in imports(p, "taskscale.controller"))
        for p in runtime
        if imports(p, "taskscale.controller")
    }
    assert offenders == {}


def test_neither_the_runtime_nor_the_controller_imports_the_dashboard() -> None:
    # worker and controller images must not need the dashboard extra; only the
    # demo serves it (when the extra is installed)
    others = [p for p in python_files("taskscale") if not {"dashboard", "demo"} & set(p.parts)]
    offenders = {
        module_name(p): sorted(imports(p, "taskscale.dashboard"))
        for p in others
        if imports(p, "taskscale.dashboard")
    }
    assert offenders == {}


def test_the_dashboard_never_imports_the_controller() -> None:
    # it reads the decisions through taskscale.scaling: no Kubernetes client needed
    dashboard = python_files("taskscale/dashboard")
    assert dashboard and not any(imports(p, "taskscale.controller") for p in dashboard)


ARCHITECTURE = REPO / "docs" / "architecture.md"


def modules_named_in_the_layout_tables(text: str) -> tuple[set[str], set[str]]:
    """The modules the first cell of each layout-table row names: full paths
    (`taskscale/keys.py`), names beside one (`shards.py`, `replication.py`),
    and the bare names after a package (`taskscale/dashboard/` (`api`,
    `pages`), `__init__` included); and the folders named (a package's
    folder stands for its __init__)."""
    named: set[str] = set()
    folders: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        tokens = line.split("|")[1].split("`")[1::2]
        folder = ""
        for token in tokens:
            if token.startswith(("taskscale/", "e2e/")):
                folder = token if token.endswith("/") else token.rsplit("/", 1)[0] + "/"
            if token.endswith("/"):
                folders.add(token if token.startswith(("taskscale/", "e2e/")) else folder + token)
            elif token.endswith(".py"):
                named.add(token if "/" in token else folder + token)
            elif token.isidentifier():
                named.add(folder + token + ".py")
    return named, folders


def test_every_module_is_named_in_the_layout_table() -> None:
    named, folders = modules_named_in_the_layout_tables(ARCHITECTURE.read_text())
    modules = {p.relative_to(REPO).as_posix() for p in python_files("taskscale", "e2e")}
    missing = sorted(modules - named - {f + "__init__.py" for f in folders})
    assert missing == [], f"docs/architecture.md's layout tables do not name: {missing}"
    gone = sorted(named - modules)
    assert gone == [], f"docs/architecture.md's layout tables name modules that are gone: {gone}"
