"""The release's pieces agree: one version everywhere, the license the metadata names."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest
import redis
import yaml

import taskscale
from support.redis_server import free_port
from support.waiting import wait_until
from taskscale.keys import Keys

REPO = Path(__file__).resolve().parents[1]


def test_one_version_everywhere() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((REPO / "charts/taskscale/Chart.yaml").read_text())
    assert taskscale.__version__ == pyproject
    assert chart["appVersion"] == pyproject
    assert f"## [{pyproject}]" in (REPO / "CHANGELOG.md").read_text()


def test_license_file_is_the_one_declared() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pyproject["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_release_script_checks_versions() -> None:
    done = subprocess.run(
        ["bash", str(REPO / "scripts/release.sh"), "--check-versions"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"version {taskscale.__version__} agrees everywhere" in done.stderr


def clean_copy(to: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored) copied to ``to``:
    a build from the checkout itself would reuse its ``taskscale.egg-info``
    (made by the editable install), whose file list keeps shipping a file that
    package-data no longer names."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = REPO / rel
        if source.is_file():  # a deleted file still listed as cached is skipped
            (to / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / rel)
    return to


@pytest.mark.slow
@pytest.mark.integration
def test_wheel_installs_alone_and_runs_a_worker_and_an_enqueue(
    tmp_path: Path, redis_url: str
) -> None:
    """What a user gets from `pip install taskscale-*.whl` in a clean venv:
    the scripts, the CRD, the dashboard's templates and static files, a
    working worker and a console that renders its pages, with no source tree
    around."""
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(clean_copy(tmp_path / "src"))],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    wheels = sorted(dist.glob("*.whl"))
    assert len(wheels) == 1 and len(sorted(dist.glob("*.tar.gz"))) == 1
    check = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
    assert {"taskscale/scripts/claim.lua", "taskscale/scripts/lib/stamp.lua"} <= names
    assert "taskscale/controller/crd.yaml" in names
    console = REPO / "taskscale/dashboard"
    shipped = {
        p.relative_to(REPO).as_posix()
        for p in [*console.glob("templates/*.html"), *console.glob("static/*")]
    }
    assert len(shipped) >= 10 and shipped <= names, sorted(shipped - names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(  # with the console's extra: its pages are rendered below
        [str(venv / "bin/pip"), "install", "-q", f"{wheels[0]}[dashboard]"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    exe = str(venv / "bin/taskscale")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "TASKSCALE_REDIS_URL": redis_url}
    cwd = tmp_path  # not the repo: nothing may come from the source tree

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
        )

    assert run("--version").stdout.strip() == f"taskscale {taskscale.__version__}"
    assert "kind: CustomResourceDefinition" in run("crd").stdout
    enqueued = run("enqueue", "noop", "--count", "3")
    assert enqueued.returncode == 0, enqueued.stderr
    worker = subprocess.Popen(
        [exe, "worker", "--import", "taskscale.examples", "--types", "noop"],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        client = redis.Redis.from_url(redis_url)
        keys = Keys()  # the default namespace: env holds no TASKSCALE_NAMESPACE
        wait_until(lambda: int(client.hget(keys.stats("noop"), "completed") or 0) == 3)
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err.decode()[-3000:]
    imported = subprocess.run(
        [str(venv / "bin/python"), "-c", "import taskscale; print(taskscale.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )
    assert str(venv) in imported.stdout  # the installed copy, not the repo's
    _console_renders_from(exe, env, cwd)


def _console_renders_from(exe: str, env: dict[str, str], cwd: Path) -> None:
    """`taskscale dashboard` of the installed wheel serves its pages (templates
    found in the package) and its static files."""
    port = free_port()
    console = subprocess.Popen(
        [exe, "dashboard", f"--port={port}"],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"

    def answers_or_exited() -> bool:
        return console.poll() is not None or _status(base + "/healthz") == 200

    try:
        wait_until(answers_or_exited, timeout=60)
        assert console.poll() is None, console.communicate()[1].decode()[-3000:]
        pages = {path: _text(base + path) for path in ("/", "/workers", "/dead/noop")}
        script = _text(base + "/static/dashboard.js")
    finally:
        console.terminate()
        _, err = console.communicate(timeout=60)
    assert "<h1>Task types" in pages["/"] and "/static/dashboard.css" in pages["/"]
    assert "Per pod" in pages["/workers"]
    assert "Dead letters of" in pages["/dead/noop"], err.decode()[-3000:]
    assert "function overviewRow" in script


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return int(reply.status)
    except OSError:
        return None


def _text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return str(reply.read().decode())


def test_chart_metadata_is_complete() -> None:
    chart = yaml.safe_load((REPO / "charts/taskscale/Chart.yaml").read_text())
    for field in ("kubeVersion", "home", "sources", "keywords", "maintainers", "annotations"):
        assert chart.get(field), field
    assert all(m.get("name") and "example" not in str(m) for m in chart["maintainers"])
    crds = yaml.safe_load(chart["annotations"]["artifacthub.io/crds"])
    assert crds[0]["name"] == "taskscalers.taskscale.io"


def test_artifact_hub_lists_the_worker_and_controller_images_at_the_version() -> None:
    chart = yaml.safe_load((REPO / "charts/taskscale/Chart.yaml").read_text())
    values = yaml.safe_load((REPO / "charts/taskscale/values.yaml").read_text())
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    version = taskscale.__version__
    assert {i["name"]: i["image"] for i in images} == {
        "taskscale-controller": f"{values['image']['repository']}:{version}",
        "taskscale-worker": f"{values['scheduler']['image']['repository']}:{version}",
    }


def test_release_script_refuses_a_stale_image_tag(tmp_path: Path) -> None:
    # a copy of what --check-versions reads, with one image left at an old tag
    for folder in ("scripts", "charts", "deploy"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    for name in ("pyproject.toml", "CHANGELOG.md", "taskscale/controller/crd.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    chart = tmp_path / "charts/taskscale/Chart.yaml"
    version = taskscale.__version__
    stale = f"ghcr.io/taskscale/taskscale-worker:{version}"
    assert stale in chart.read_text()
    chart.write_text(chart.read_text().replace(stale, "ghcr.io/taskscale/taskscale-worker:0.0.1"))

    done = subprocess.run(
        ["bash", str(tmp_path / "scripts/release.sh"), "--check-versions"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert f"artifacthub.io/images has taskscale-worker:0.0.1, not {version}" in done.stderr
