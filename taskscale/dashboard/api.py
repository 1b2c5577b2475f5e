"""The dashboard's JSON API under ``/api/`` (the pages use nothing else).

Reads are open to whoever can reach the port (it binds 127.0.0.1 by
default).  Every state change is a POST that must carry the operator token
in the ``X-Taskscale-Token`` header, or it is refused with 403 and nothing
is changed -- and there is no way to send it without a token configured.  A
browser never attaches that header by itself, so another site cannot make
the operator's browser change anything (CSRF): it would need the token, and
a cross-origin request with a custom header is stopped by the browser's
preflight (no CORS headers are ever sent).  Each change is one of the atomic
admin scripts (:mod:`taskscale.admin`) or an enqueue, made in the namespace
that holds its task type (a sharded deployment's reads cover every namespace:
:mod:`taskscale.dashboard.data`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from taskscale import admin
from taskscale.dashboard import browse_data, controls, data, history_data
from taskscale.dashboard.state import Context, context, in_thread, page_params
from taskscale.json_input import JsonInputError, parse_json
from taskscale.keys import check_name, parse_priority
from taskscale.producer import Call, Producer
from taskscale.rpc import CallOptions, RemoteError, TaskTimeout, call_async

#: Longest a "call" from the console waits for the result, seconds.
MAX_CALL_TIMEOUT_S = 120.0


class ApiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _json(doc: Any, code: int = 200) -> JSONResponse:
    return JSONResponse(doc, status_code=code, headers={"Cache-Control": "no-store"})


def _type(request: Request) -> str:
    try:
        return check_name("task type", request.path_params["type"])
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:  # the limits of every JSON input: size, nesting, no NaN
        doc = parse_json(raw, "the body")
    except JsonInputError as exc:
        raise ApiError(400, str(exc)) from None
    if not isinstance(doc, dict):
        raise ApiError(400, "the body must be a JSON object")
    return doc


def _call_args(body: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    args, kwargs = body.get("args", []), body.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ApiError(400, "args must be a JSON list and kwargs a JSON object")
    return args, kwargs


def _ids(body: dict[str, Any]) -> list[str] | None:
    """``{"all": true}`` -> None (every one); ``{"ids": [...]}`` -> the ids."""
    if body.get("all") is True:
        return None
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ApiError(400, 'give {"ids": [task ids]} or {"all": true}')
    return ids


def _number(body: dict[str, Any], name: str, default: float, top: float) -> float:
    value = body.get(name, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ApiError(400, f"{name} must be a number")
    try:
        number = float(value)
    except ValueError:
        raise ApiError(400, f"{name} must be a number") from None
    if not math.isfinite(number) or not 0 <= number <= top:
        raise ApiError(400, f"{name} must be between 0 and {top:g}")
    return number


Handler = Callable[[Context, Request], Any]


def _read(handler: Handler) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        ctx = context(request)
        try:
            doc = await in_thread(handler, ctx, request)
        except ApiError as exc:
            return _json({"error": str(exc)}, exc.code)
        except (ValueError, TypeError) as exc:
            return _json({"error": str(exc)}, 400)
        return _json(doc)

    return endpoint


def _write(handler: Callable[[Context, Request, dict[str, Any]], Any]) -> Callable[..., Any]:
    async def endpoint(request: Request) -> Response:
        ctx = context(request)
        if not ctx.authorized(request):
            why = "a valid X-Taskscale-Token header" if ctx.token else "--token (read-only now)"
            return _json({"error": f"forbidden: state changes need {why}"}, 403)
        try:
            body = await _body(request)
            doc = await in_thread(handler, ctx, request, body)
            ctx.snapshots.forget()
        except ApiError as exc:
            return _json({"error": str(exc)}, exc.code)
        except controls.Missing as exc:
            return _json({"error": str(exc)}, 404)
        except (ValueError, TypeError) as exc:
            return _json({"error": str(exc)}, 400)
        return _json(doc)

    return endpoint


# --- reads ------------------------------------------------------------------------------


def get_status(ctx: Context, request: Request) -> Any:
    """Exactly ``taskscale status --json`` (``--namespace`` as the console's)."""
    found = data.status_of(ctx.client, ctx.shards)
    for t in found["types"].values():
        t.pop("stats", None)
    return found


def get_overview(ctx: Context, request: Request) -> Any:
    return ctx.snapshots.get("overview", lambda: _overview(ctx))


def _overview(ctx: Context) -> Any:
    found = data.overview(ctx.client, ctx.shards, rates=True)  # real rates on the first load
    catalog = data.catalog(ctx.client, ctx.shards)
    for name in catalog["types"].keys() - found["types"].keys():  # served, never enqueued
        found["types"][name] = data.empty_row()
    found["types"] = dict(sorted(found["types"].items()))
    found["unserved"] = catalog["unserved"]
    found["rates"] = found.pop("rates")  # the last key, as before
    return found


def get_history(ctx: Context, request: Request) -> Any:
    """``?type=T`` (absent: every type summed), ``?since=`` seconds (10..86400, 3600)."""
    name = request.query_params.get("type") or None
    if name is not None:
        check_name("task type", name)
    since = int(request.query_params.get("since", "3600"))
    if not 10 <= since <= 86400:
        raise ApiError(400, "since must be 10..86400 seconds")
    return history_data.read(ctx.client, ctx.shards, name, since)


def get_queued(ctx: Context, request: Request) -> Any:
    """``/api/queued/T/P?start=&count=``: T's ready tasks at priority P."""
    priority = parse_priority(request.path_params["priority"])
    start, count = page_params(request)
    return browse_data.queued(
        ctx.client, ctx.shards, _type(request), priority, start=start, count=count
    )


def get_running(ctx: Context, request: Request) -> Any:
    return browse_data.running(ctx.client, ctx.shards)


def get_recent(ctx: Context, request: Request) -> Any:
    return browse_data.recent(ctx.client, ctx.shards, _type(request))


def get_search(ctx: Context, request: Request) -> Any:
    """``/api/search?q=TEXT[&type=T]``: queued and delayed tasks whose envelope has TEXT."""
    name = request.query_params.get("type") or None
    if name is not None:
        check_name("task type", name)
    return browse_data.search(
        ctx.client, ctx.shards, request.query_params.get("q", ""), task_type=name
    )


def get_catalog(ctx: Context, request: Request) -> Any:
    return data.catalog(ctx.client, ctx.shards)


def get_type(ctx: Context, request: Request) -> Any:
    return data.type_detail(ctx.client, ctx.shards, _type(request))


def get_workers(ctx: Context, request: Request) -> Any:
    return data.workers(ctx.client, ctx.shards)


def get_dead(ctx: Context, request: Request) -> Any:
    task_type = _type(request)
    start, count = page_params(request)
    return data.dead_letters(ctx.client, ctx.shards, task_type, start=start, count=count)


def get_delayed(ctx: Context, request: Request) -> Any:
    task_type = _type(request)
    start, count = page_params(request)
    return data.delayed_tasks(ctx.client, ctx.shards, task_type, start=start, count=count)


def get_fanouts(ctx: Context, request: Request) -> Any:
    return {"fanouts": data.fanouts(ctx.client, ctx.shards)}


def get_scalers(ctx: Context, request: Request) -> Any:
    return {"scalers": data.scalers(ctx.client, ctx.shards)}


def get_task(ctx: Context, request: Request) -> Any:
    task_id = check_name("task id", request.path_params["id"])
    try:
        info = data.find_task(ctx.client, ctx.shards, task_id, limit=50_000)
    except admin.LookupLimitReached as exc:
        raise ApiError(404, str(exc)) from None
    if info is None:
        return {"id": task_id, "state": "unknown"}
    return {
        "id": task_id,
        "state": info.state,
        "type": info.task_type,
        "where": info.where,
        "ok": info.ok,
        "result": info.result,
        "error": info.error,
    }


# --- writes -----------------------------------------------------------------------------


def post_auth(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    return {"ok": True}


def post_dead(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    op = request.path_params["op"]
    run = {"retry": admin.dead_requeue, "delete": admin.dead_purge}.get(op)
    if run is None:
        raise ApiError(404, f"no dead-letter operation {op!r}")
    task_type = _type(request)
    return {"done": run(ctx.client, ctx.keys_for(task_type), task_type, ids=_ids(body))}


def post_delayed(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    op = request.path_params["op"]
    run = {"run": admin.delayed_run_now, "delete": admin.delayed_delete}.get(op)
    if run is None:
        raise ApiError(404, f"no delayed-task operation {op!r}")
    task_id = check_name("task id", request.path_params["id"])
    task_type = _type(request)
    if not run(ctx.client, ctx.keys_for(task_type), task_type, task_id):
        raise ApiError(404, f"task {task_id} is not among the delayed tasks")
    return {"done": 1}


def post_enqueue(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    args, kwargs = _call_args(body)
    priority = parse_priority(body.get("priority", 5))
    delay = _number(body, "delay", 0.0, 365 * 86400.0)
    task_type = _type(request)
    producer = Producer(ctx.client, keys=ctx.keys_for(task_type))
    [task_id] = producer.enqueue_many(
        task_type, [Call(args, kwargs)], delay=delay or None, priority=priority
    )
    return {"id": task_id}


def post_call(ctx: Context, request: Request, body: dict[str, Any]) -> Any:
    args, kwargs = _call_args(body)
    # The console's Call is an operator trying a task while the page waits: the
    # first error is the answer unless the body asks for retries ("retries":
    # a number, or null for the task's own, as taskscale.call() does).
    retries: int | None = 0
    if "retries" in body:
        asked = body["retries"]
        retries = None if asked is None else int(_number(body, "retries", 0, 100))
    options = CallOptions(priority=parse_priority(body.get("priority", 5)), max_retries=retries)
    timeout = _number(body, "timeout", 30.0, MAX_CALL_TIMEOUT_S)
    task_type = _type(request)
    keys = ctx.keys_for(task_type)
    handle = call_async(ctx.client, task_type, *args, options=options, keys=keys, **kwargs)
    try:
        return {"id": handle.id, "ok": True, "result": handle.get(timeout)}
    except RemoteError as exc:
        return {"id": handle.id, "ok": False, "error": str(exc)}
    except TaskTimeout:
        return {"id": handle.id, "ok": False, "error": f"no result within {timeout:g} s"}


ROUTES = [
    Route("/api/status", _read(get_status)),
    Route("/api/overview", _read(get_overview)),
    Route("/api/history", _read(get_history)),
    Route("/api/queued/{type}/{priority}", _read(get_queued)),
    Route("/api/running", _read(get_running)),
    Route("/api/recent/{type}", _read(get_recent)),
    Route("/api/search", _read(get_search)),
    Route("/api/catalog", _read(get_catalog)),
    Route("/api/types/{type}", _read(get_type)),
    Route("/api/workers", _read(get_workers)),
    Route("/api/dead/{type}", _read(get_dead)),
    Route("/api/delayed/{type}", _read(get_delayed)),
    Route("/api/fanouts", _read(get_fanouts)),
    Route("/api/scalers", _read(get_scalers)),
    Route("/api/tasks/{id}", _read(get_task)),
    Route("/api/auth", _write(post_auth), methods=["POST"]),
    Route("/api/dead/{type}/{op}", _write(post_dead), methods=["POST"]),
    Route("/api/delayed/{type}/{id}/{op}", _write(post_delayed), methods=["POST"]),
    Route("/api/enqueue/{type}", _write(post_enqueue), methods=["POST"]),
    Route("/api/call/{type}", _write(post_call), methods=["POST"]),
    Route("/api/types/{type}/{op}", _write(controls.post_pause), methods=["POST"]),
    Route("/api/limits/{type}", _write(controls.post_limits), methods=["POST"]),
    Route("/api/schedules/{type}/{name}/{op}", _write(controls.post_schedule), methods=["POST"]),
]
