"""The local API (`/v1`): token-protected daemon status and the question broker for operators."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..broker import Broker


def routes(token: str, status: Callable[[], dict[str, Any]], broker: Broker) -> list[Route]:
    def authorized(request: Request) -> bool:
        got = request.headers.get("authorization", "")
        return secrets.compare_digest(got.encode(), f"Bearer {token}".encode())

    def refused() -> JSONResponse:
        return JSONResponse({"error": "mcpx API token required"}, status_code=401)

    async def get_status(request: Request) -> JSONResponse:
        if not authorized(request):
            return refused()
        return JSONResponse(status())

    async def list_questions(request: Request) -> JSONResponse:
        """Open questions first-hand; `?all=1` adds the stored history (answered, expired)."""
        if not authorized(request):
            return refused()
        open_ = [q.public() for q in broker.open_questions()]
        body: dict[str, Any] = {"open": open_}
        if request.query_params.get("all") and broker.store is not None:
            body["history"] = await broker.store.questions()
        return JSONResponse(body)

    async def answer_question(request: Request) -> JSONResponse:
        """An operator's answer: `{"answer": {...}, "by": "name"}`. First answer wins."""
        if not authorized(request):
            return refused()
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"error": "body must be JSON"}, status_code=400)
        if not isinstance(body, dict) or not isinstance(body.get("answer"), dict):
            return JSONResponse({"error": 'body must be {"answer": {...}, "by": "..."}'}, status_code=400)
        qid = request.path_params["qid"]
        if broker.get(qid) is None:
            return JSONResponse({"error": f"no open question {qid}"}, status_code=404)
        by = str(body.get("by") or "operator")
        taken = await broker.answer(qid, body["answer"], f"operator:{by}")
        if not taken:
            return JSONResponse({"error": f"question {qid} was already answered"}, status_code=409)
        return JSONResponse({"taken": True})

    return [
        Route("/v1/status", get_status, methods=["GET"]),
        Route("/v1/questions", list_questions, methods=["GET"]),
        Route("/v1/questions/{qid}/answer", answer_question, methods=["POST"]),
    ]
