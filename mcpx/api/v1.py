"""`/v1`: the operator's REST API (FastAPI; its OpenAPI document, `/v1/openapi.json`, is generated
from the models in api/models.py). Every route needs the state folder's token; a browser page from
a foreign origin is refused. The live feed is the websocket `/v1/events` (api/feed.py).
"""

from __future__ import annotations

import collections
import secrets
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..events.bus import EventKind
from ..protocol.errors import LimitReached
from ..protocol.origin import origin_allowed
from ..questions.answers import AnswerError
from ..records.question import QuestionStatus
from ..upstream.pool import UpstreamServer
from . import models, upstream_routes
from .operations import CURSOR_PATTERN, Conflict, NotFound, Operations, Unavailable

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": models.ErrorBody, "description": "The body is not JSON."},
    401: {"model": models.ErrorBody, "description": "The state folder's token is missing or wrong."},
    403: {"model": models.ErrorBody, "description": "A request from a foreign browser origin."},
    422: {"model": models.ErrorBody, "description": "The request does not fit (the fields say where)."},
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": models.ErrorBody, "description": "No such thing."}}
CONFLICT: dict[int | str, dict[str, Any]] = {409: {"model": models.ErrorBody, "description": "Too late: already done."}}
TOO_LARGE: dict[int | str, dict[str, Any]] = {
    413: {"model": models.ErrorBody, "description": "An answer over `questions.maxBytes`."}
}
UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {
        "model": models.ErrorBody,
        "description": "The store could not record the answer: nothing changed, try again.",
    }
}
SEQ_MAX = 2**63 - 1  # SQLite's largest integer
_bearer = HTTPBearer(auto_error=False, description="The token in the daemon's state folder (`token`, mode 0600).")
StatusFn = Callable[[], Awaitable[dict[str, Any]]]


def build(
    ops: Operations,
    token: str,
    status: StatusFn,
    allowed_origins: list[str],
    upstreams: dict[str, UpstreamServer] | None = None,
) -> FastAPI:
    async def guard(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
    ) -> None:
        origin = request.headers.get("origin")
        if origin is not None and not origin_allowed(origin, allowed_origins):
            raise HTTPException(403, f"origin {origin!r} is not allowed")
        given = credentials.credentials if credentials is not None else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "the mcpx API token is required", headers={"WWW-Authenticate": "Bearer"})
        declared = _query_names(request)
        unknown = sorted(set(request.query_params) - declared.keys())
        if unknown:  # a misspelt filter would otherwise be silently ignored
            raise RequestValidationError(
                [{"loc": ("query", unknown[0]), "msg": "unknown query parameter", "type": "extra_forbidden"}]
            )
        counts = collections.Counter(key for key, _ in request.query_params.multi_items())
        repeated = sorted(k for k, n in counts.items() if n > 1 and not declared[k])
        if repeated:  # one value is asked for; taking the last of several would hide the others
            raise RequestValidationError(
                [{"loc": ("query", repeated[0]), "msg": "given more than once; it takes one value", "type": "too_long"}]
            )

    app = FastAPI(
        title="mcpx operator API",
        version=__version__,
        description="Every task of every host, its questions and its event log. See docs/api.md.",
        openapi_url="/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(guard)],
        responses=ERRORS,
    )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = {".".join(str(p) for p in e["loc"]): str(e["msg"]) for e in exc.errors()}
        return JSONResponse({"error": "the request does not fit", "fields": fields}, 422)

    def by_of(name: str | None) -> str:
        return f"operator:{(name or 'operator').strip()[:64] or 'operator'}"

    @app.get("/v1/health", response_model=models.Health, summary="The daemon answers")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/v1/status", response_model=models.Status, summary="The daemon, its upstreams and who is attached")
    async def get_status() -> dict[str, Any]:
        return await status()

    @app.get("/v1/connections", response_model=models.ConnectionList, summary="Host connections")
    async def list_connections(
        closed: Annotated[bool, Query(description="Include closed connections.")] = True,
        cursor: Annotated[
            str | None, Query(pattern=CURSOR_PATTERN, description="A `nextCursor` from an earlier page.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=5000, description="Connections per page, oldest first.")] = 1000,
    ) -> dict[str, Any]:
        try:
            page, nxt = await ops.connections(include_closed=closed, cursor=cursor, limit=limit)
        except ValueError as exc:
            raise HTTPException(422, f"cursor: {exc}") from None
        return {"connections": page, "nextCursor": nxt}

    @app.get("/v1/connections/{connection_id}", response_model=models.Connection, responses=NOT_FOUND)
    async def get_connection(connection_id: Annotated[str, Path()]) -> dict[str, Any]:
        try:
            return await ops.connection(connection_id)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/v1/tasks", response_model=models.TaskPage, summary="Tasks, newest first")
    async def list_tasks(
        connection: Annotated[str | None, Query(description="Only this connection's tasks.")] = None,
        status: Annotated[list[models.TaskStatus] | None, Query(description="Only these statuses.")] = None,
        tool: Annotated[str | None, Query(description="Only this (upstream) tool.")] = None,
        q: Annotated[str | None, Query(description="Text in the id, tool, upstream or status message.")] = None,
        cursor: Annotated[
            str | None, Query(pattern=CURSOR_PATTERN, description="A `nextCursor` from an earlier page.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        id_prefix: Annotated[
            str | None,
            Query(alias="idPrefix", min_length=1, description="Only tasks whose id starts with this (a short id)."),
        ] = None,
    ) -> dict[str, Any]:
        try:
            page = await ops.tasks(
                connection=connection,
                statuses=frozenset(status or ()),
                tool=tool,
                text=q,
                cursor=cursor,
                limit=limit,
                id_prefix=id_prefix,
            )
        except ValueError as exc:
            raise HTTPException(422, f"cursor: {exc}") from None
        return {"tasks": page.tasks, "nextCursor": page.next_cursor}

    @app.get("/v1/tasks/{task_id}", response_model=models.TaskDetail, responses=NOT_FOUND)
    async def get_task(task_id: Annotated[str, Path()]) -> dict[str, Any]:
        try:
            return await ops.task(task_id)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @app.post(
        "/v1/tasks/{task_id}/cancel",
        response_model=models.TaskDetail,
        responses={**NOT_FOUND, **CONFLICT},
        summary="Cancel a task (it stops upstream too)",
    )
    async def cancel_task(task_id: Annotated[str, Path()], body: models.CancelBody | None = None) -> dict[str, Any]:
        try:
            return await ops.cancel_task(task_id, by_of(body.by if body else None))
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None

    @app.post(
        "/v1/tasks/{task_id}/input",
        response_model=models.InputOutcome,
        responses={**NOT_FOUND, **TOO_LARGE, **UNAVAILABLE},
        summary="Answer a task's input requests (either era), as a 2026 host's tasks/update would",
    )
    async def task_input(task_id: Annotated[str, Path()], body: models.InputBody) -> Any:
        try:
            return await ops.task_input(task_id, body.inputResponses, by_of(body.by))
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except LimitReached as exc:
            raise HTTPException(413, exc.message) from None
        except Unavailable as exc:
            raise HTTPException(503, str(exc)) from None
        except AnswerError as exc:
            return _unfit(exc)

    @app.get("/v1/tasks/{task_id}/frames", response_model=models.FrameList, summary="JSON-RPC frames of a task")
    async def task_frames(task_id: Annotated[str, Path()]) -> dict[str, Any]:
        return {"frames": [f.wire() for f in ops.frames(task_id)]}

    @app.get("/v1/allowances", response_model=models.AllowanceList, summary="Approval allowances in force")
    async def list_allowances() -> dict[str, Any]:
        return {"allowances": [a.wire() for a in ops.allowances()]}

    @app.delete("/v1/allowances/{allowance_id}", response_model=models.Allowance, responses=NOT_FOUND)
    async def revoke_allowance(allowance_id: Annotated[str, Path()]) -> dict[str, Any]:
        revoked = ops.revoke_allowance(allowance_id)
        if revoked is None:
            raise HTTPException(404, f"no allowance {allowance_id}")
        return revoked.wire()

    @app.get("/v1/questions", response_model=models.QuestionList, summary="Questions from upstreams")
    async def list_questions(
        status: Annotated[list[QuestionStatus] | None, Query(description="Default: open ones.")] = None,
        task: Annotated[str | None, Query(description="Only this task's.")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
        id_prefix: Annotated[
            str | None,
            Query(alias="idPrefix", min_length=1, description="Only questions whose id starts with this (a short id)."),
        ] = None,
    ) -> dict[str, Any]:
        statuses = frozenset(status or ("open",))
        return {"questions": [q.wire() for q in await ops.questions(statuses, task, limit, id_prefix)]}

    @app.get("/v1/questions/{question_id}", response_model=models.Question, responses=NOT_FOUND)
    async def get_question(question_id: Annotated[str, Path()]) -> dict[str, Any]:
        try:
            return (await ops.question(question_id)).wire()
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @app.post(
        "/v1/questions/{question_id}/answer",
        response_model=models.Question,
        responses={**NOT_FOUND, **CONFLICT, **TOO_LARGE, **UNAVAILABLE},
        summary="Answer a question (checked against what it asks)",
    )
    async def answer_question(question_id: Annotated[str, Path()], body: models.AnswerBody) -> Any:
        try:
            q = await ops.answer(question_id, body.action, body.content, body.result, by_of(body.by))
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None
        except LimitReached as exc:
            raise HTTPException(413, exc.message) from None
        except Unavailable as exc:
            raise HTTPException(503, str(exc)) from None
        except AnswerError as exc:
            return _unfit(exc)
        return q.wire()

    @app.post(
        "/v1/questions/{question_id}/link",
        response_model=models.AnswerLink,
        responses={**NOT_FOUND, **CONFLICT},
        summary="A one-time link that answers this question from a browser (docs/answer-links.md)",
    )
    async def answer_link(question_id: Annotated[str, Path()]) -> dict[str, Any]:
        try:
            url, expires = await ops.answer_link(question_id)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None
        return {"url": url, "expiresMs": expires}

    upstream_routes.add_routes(app, upstreams or {}, by_of)

    @app.get("/v1/events", response_model=models.EventPage, summary="The event log (the audit log)")
    async def list_events(
        since: Annotated[int, Query(ge=0, le=SEQ_MAX, description="Events after this sequence number.")] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 500,
        task: Annotated[str | None, Query()] = None,
        kind: Annotated[list[EventKind] | None, Query(description="Only these kinds.")] = None,
    ) -> dict[str, Any]:
        events, last = await ops.events(since, limit, task, frozenset(kind or ()))
        return {"events": [e.wire() for e in events], "lastSeq": last}

    return app


def _query_names(request: Request) -> dict[str, bool]:
    """The query parameters the matched route declares, each with whether it takes several values."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)  # an APIRoute; other routes declare none
    names: dict[str, bool] = {}
    stack = [dependant] if dependant is not None else []
    while stack:
        d = stack.pop()
        names.update((p.alias, _takes_many(p.field_info.annotation)) for p in d.query_params)
        stack.extend(d.dependencies)
    return names


def _takes_many(annotation: object) -> bool:
    """`list[X]`, or `list[X] | None`: a parameter given once per value."""
    origin = typing.get_origin(annotation)
    if origin in (list, set, frozenset, tuple):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_takes_many(arg) for arg in typing.get_args(annotation))
    return False


def _unfit(exc: AnswerError) -> JSONResponse:
    return JSONResponse({"error": str(exc), "fields": exc.fields}, 422)
