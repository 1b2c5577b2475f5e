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

from taskscale.catalog import signature_text
from taskscale.dashboard import data, forms
from taskscale.dashboard.read_auth import login_cookie, safe_next
from taskscale.dashboard.state import PAGE, context, in_thread, page_params
from taskscale.keys import check_name
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


ROUTES = [
    Route("/login", login, methods=["GET", "POST"]),
    Route("/", overview),
    Route("/scaling", scaling),
    Route("/workers", workers),
    Route("/fanouts", fanouts),
    Route("/types/{type}", task_type),
    Route("/dead/{type}", dead),
    Route("/delayed/{type}", delayed),
    Route("/workflows", workflows),
    Route("/workflows/{id}", workflow),
]
