"""The dashboard's HTML pages, rendered with Jinja2 (autoescaping on).

Every value from Redis goes through the template's escaping (or, on the
live pages, into ``textContent`` from the JS), so a task argument of
``<script>`` is shown as text.  The overview and scaling pages are shells
that ``static/dashboard.js`` fills from ``/api/`` every two seconds; the
others are rendered here from the same readers as the API.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from taskscale.admin import LookupLimitReached
from taskscale.catalog import signature_text
from taskscale.dashboard import browse_data, charts, data, forms, history_data
from taskscale.dashboard.read_auth import login_cookie, safe_next
from taskscale.dashboard.state import PAGE, context, in_thread, page_params
from taskscale.keys import check_name, parse_priority
from taskscale.status import ago
from taskscale.text import shown

_env = Environment(
    loader=PackageLoader("taskscale.dashboard", "templates"),
    autoescape=select_autoescape(["html"], default=True),
)
_env.filters["urlencode"] = lambda v: quote(str(v), safe="")
# JSON as a person reads it ("é", "<"), escaped by the template like any text --
# Jinja's own ``tojson`` is for inside <script> and shows "<" as \u003c.
_env.filters["json"] = lambda v: json.dumps(shown(v), ensure_ascii=False)


def _when(ms: int | float | None) -> str:
    if not ms:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z"


def _render(request: Request, template: str, page: str, **values: Any) -> Response:
    ctx = context(request)
    html = _env.get_template(template).render(
        root=ctx.root,
        page=page,
        writable=ctx.writable,
        namespace=",".join(ctx.shards.namespaces),
        sharded=ctx.shards.sharded,
        redis_where=ctx.redis_where,
        ago=ago,
        when=_when,
        **values,
    )
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


def _type(request: Request) -> str | None:
    try:
        return check_name("task type", request.path_params["type"])
    except ValueError:
        return None


def _page(request: Request) -> tuple[int, int]:
    """``?start=`` and ``?count=`` of a listing page; nonsense reads as the first page."""
    try:
        return page_params(request)
    except ValueError:
        return 0, PAGE


def _pages(found: dict[str, Any]) -> dict[str, Any]:
    """Where a listing page is: first and last entry shown (1-based), and the
    ``start`` of the previous and next pages (None at either end)."""
    start, count, total = found["start"], found["count"], found["total"]
    shown = len(found.get("letters", found.get("tasks", [])))
    return {
        "first": start + 1 if shown else 0,
        "last": start + shown,
        "total": total,
        "count": count,
        "previous": max(0, start - count) if start > 0 else None,
        "next": start + count if start + count < total else None,
    }


def not_found(request: Request, what: str) -> Response:
    """The styled 404 page (a bad task type, or a path no route serves)."""
    response = _render(request, "404.html", "404", what=what)
    response.status_code = 404
    return response


async def overview(request: Request) -> Response:
    return _render(request, "overview.html", "overview")


async def scaling(request: Request) -> Response:
    return _render(request, "scaling.html", "scaling")


async def workers(request: Request) -> Response:
    ctx = context(request)
    found = await in_thread(data.workers, ctx.client, ctx.shards)
    return _render(request, "workers.html", "workers", **found)


async def fanouts(request: Request) -> Response:
    ctx = context(request)
    found = await in_thread(data.fanouts, ctx.client, ctx.shards)
    return _render(request, "fanouts.html", "fanouts", fanouts=found)


async def task_type(request: Request) -> Response:
    ctx = context(request)
    name = _type(request)
    if name is None:
        return not_found(request, "task type")
    detail = await in_thread(data.type_detail, ctx.client, ctx.shards, name)
    entry = detail["catalog"]
    return _render(
        request,
        "type.html",
        "type",
        task_type=name,
        detail=detail,
        fields=forms.fields(entry),
        signature=signature_text(entry) if entry else "",
    )


async def dead(request: Request) -> Response:
    ctx = context(request)
    name = _type(request)
    if name is None:
        return not_found(request, "task type")
    start, count = _page(request)
    found = await in_thread(
        data.dead_letters, ctx.client, ctx.shards, name, start=start, count=count
    )
    return _render(request, "dead.html", "dead", task_type=name, dead=found, pages=_pages(found))


async def delayed(request: Request) -> Response:
    ctx = context(request)
    name = _type(request)
    if name is None:
        return not_found(request, "task type")
    start, count = _page(request)
    found = await in_thread(
        data.delayed_tasks, ctx.client, ctx.shards, name, start=start, count=count
    )
    return _render(
        request, "delayed.html", "delayed", task_type=name, delayed=found, pages=_pages(found)
    )


async def workflows(request: Request) -> Response:
    ctx = context(request)
    wanted = request.query_params.get("id", "").strip()
    if wanted:  # the id box: a plain GET form (the CSP allows no inline script)
        return RedirectResponse(f"{ctx.root}/workflows/{quote(wanted, safe='')}", status_code=303)
    found = await in_thread(data.workflows, ctx.client, ctx.shards)
    return _render(request, "workflows.html", "workflows", workflows=found)


async def workflow(request: Request) -> Response:
    ctx = context(request)
    try:
        workflow_id = check_name("workflow id", request.path_params["id"])
    except ValueError:
        return not_found(request, "workflow")
    found = await in_thread(data.workflow, ctx.client, ctx.shards, workflow_id)
    if found is None:
        return not_found(request, f"workflow {workflow_id}")
    return _render(request, "workflow.html", "workflows", wf=found)


async def login(request: Request) -> Response:
    """The token box of ``--auth-reads``: the right token sets the read cookie
    and goes back to ``next``; a GET, or a wrong token (401), shows the box."""
    auth = context(request).read_auth
    if auth is None:
        return not_found(request, "page")
    target = safe_next(request.query_params.get("next", "/"))
    if request.method != "POST":
        return _render(request, "login.html", "login", next=target, wrong=False)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    target = safe_next(form.get("next", [target])[0])
    if not auth.token_ok(form.get("token", [""])[0]):
        response = _render(request, "login.html", "login", next=target, wrong=True)
        response.status_code = 401
        return response
    root = context(request).root
    response = RedirectResponse(target, status_code=303)
    secure = request.url.scheme == "https"
    response.headers["Set-Cookie"] = login_cookie(auth, root=root, secure=secure)
    return response


def _since(request: Request) -> int:
    """``?since=`` seconds, one of the page's windows (else 1 h)."""
    try:
        since = int(request.query_params.get("since", "3600"))
    except ValueError:
        return 3600
    return since if since in history_data.WINDOWS else 3600


async def history_page(request: Request) -> Response:
    name = None
    if "type" in request.path_params:
        name = _type(request)
        if name is None:
            return not_found(request, "task type")
    since = _since(request)
    ctx = context(request)
    found = await in_thread(history_data.read, ctx.client, ctx.shards, name, since)
    rows, per = found["rows"], float(found["bucket_s"])
    charts_shown = [
        charts.line_chart(rows, [("completed", "completed/s", "ok"), ("failed", "failed/s", "bad"),
                                 ("dead", "dead/s", "dead")], title="runs per second", per=per),
        charts.line_chart(rows, [("queued", "queued", "ok"), ("running", "running", "run")],
                          title="queued and running (sampled by the scheduler)"),
        charts.line_chart(rows, [("wait_p50_ms", "p50", "ok"), ("wait_p95_ms", "p95", "bad")],
                          title="queue wait, ms"),
        charts.line_chart(rows, [("run_p50_ms", "p50", "ok"), ("run_p95_ms", "p95", "bad")],
                          title="run time, ms"),
    ]  # fmt: skip
    totals = {f: sum(r[f] for r in rows) for f in ("completed", "failed", "dead")}
    return _render(
        request,
        "history.html",
        "history",
        task_type=name,
        since=since,
        windows=history_data.WINDOWS,
        charts=charts_shown,
        totals=totals,
    )


async def queued(request: Request) -> Response:
    ctx = context(request)
    name = _type(request)
    try:
        priority = parse_priority(request.path_params.get("priority", "5"))
    except ValueError:
        return not_found(request, "priority")
    if name is None:
        return not_found(request, "task type")
    start, count = _page(request)
    found = await in_thread(
        browse_data.queued, ctx.client, ctx.shards, name, priority, start=start, count=count
    )
    return _render(
        request, "queued.html", "queued", task_type=name, queued=found, pages=_pages(found)
    )


async def recent(request: Request) -> Response:
    ctx = context(request)
    name = _type(request)
    if name is None:
        return not_found(request, "task type")
    found = await in_thread(browse_data.recent, ctx.client, ctx.shards, name)
    return _render(request, "recent.html", "recent", task_type=name, recent=found)


async def running(request: Request) -> Response:
    ctx = context(request)
    found = await in_thread(browse_data.running, ctx.client, ctx.shards)
    return _render(request, "running.html", "running", running=found)


async def find(request: Request) -> Response:
    """The task-id box (``?id=``) and the argument search (``?q=``, ``?type=``)."""
    ctx = context(request)
    task_id, text = request.query_params.get("id", "").strip(), request.query_params.get("q", "")
    name = request.query_params.get("type", "").strip() or None
    found: Any = None
    error = ""
    try:
        if task_id:
            check_name("task id", task_id)
            found = await in_thread(data.find_task, ctx.client, ctx.shards, task_id, limit=50_000)
        elif text:
            if name is not None:
                check_name("task type", name)
            found = await in_thread(
                browse_data.search, ctx.client, ctx.shards, text, task_type=name
            )
    except (ValueError, LookupLimitReached) as exc:
        error = str(exc)
    return _render(
        request,
        "find.html",
        "find",
        task_id=task_id,
        text=text,
        search_type=name or "",
        found=found,
        error=error,
        cap=browse_data.SEARCH_CAP,
    )


ROUTES = [
    Route("/login", login, methods=["GET", "POST"]),
    Route("/", overview),
    Route("/running", running),
    Route("/recent/{type}", recent),
    Route("/find", find),
    Route("/queued/{type}", queued),
    Route("/queued/{type}/{priority}", queued),
    Route("/history", history_page),
    Route("/history/{type}", history_page),
    Route("/scaling", scaling),
    Route("/workers", workers),
    Route("/fanouts", fanouts),
    Route("/types/{type}", task_type),
    Route("/dead/{type}", dead),
    Route("/delayed/{type}", delayed),
    Route("/workflows", workflows),
    Route("/workflows/{id}", workflow),
]
