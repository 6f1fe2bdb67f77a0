"""Spans for time spent waiting on answers: a question an upstream asked, an approval, an MRTR
round. Decorators on the Asker's methods (host/asking.py), so the code that asks stays as it is;
off, each is one test of `tracing.tracer` per question (questions are rare; no hot path here)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from . import tracing

if TYPE_CHECKING:
    from opentelemetry.context import Context


class RequestContext(Protocol):
    """What a wait needs of the host request it belongs to (host/connection.py's RequestContext):
    its span, if tracing made one. Telemetry imports nothing of the packages it observes."""

    @property
    def span(self) -> Any: ...


P = ParamSpec("P")
R = TypeVar("R")
# What a decorated method's arguments say of its span: (name, the request's context, attributes).
Describe = Callable[..., tuple[str, "RequestContext", dict[str, Any]]]


def traced_wait(describe: Describe) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if tracing.tracer is None:
                return await fn(*args, **kwargs)
            name, ctx, attributes = describe(*args, **kwargs)
            with waiting(name, ctx, attributes):
                return await fn(*args, **kwargs)

        return wrapper

    return decorate


@contextlib.contextmanager
def waiting(name: str, ctx: RequestContext, attributes: dict[str, Any]) -> Iterator[None]:
    """A span around a wait: a child of what runs now if anything does (the upstream call that
    asked, over HTTP), else of the host request's span (a stdio upstream asks from its reader)."""
    assert tracing.tracer is not None
    from opentelemetry import trace

    here = trace.get_current_span()
    parent = None if here.get_span_context().is_valid else _request_context(ctx)
    span = tracing.tracer.start_span(name, context=parent, attributes=attributes)
    with tracing.current(span):
        try:
            yield
        except BaseException as exc:
            tracing.fail(span, "cancelled" if tracing.cancelled(exc) else type(exc).__name__, str(exc))
            raise
        finally:
            span.end()


def _request_context(ctx: RequestContext) -> Context | None:
    if ctx.span is None:
        return None
    from opentelemetry import trace

    return trace.set_span_in_context(ctx.span)


def _key(server: object) -> str:
    return str(getattr(server, "key", server))


# ---- what each Asker method's arguments say (self, ctx, ...) ---------------------------------
def question(
    _self: object, ctx: RequestContext, method: str, params: object, server: object
) -> tuple[str, RequestContext, dict[str, Any]]:
    return f"mcpx.question {method}", ctx, {"mcp.method.name": method, "mcpx.upstream": _key(server)}


def approval(
    _self: object, ctx: RequestContext, upstream: str, params: object, expiry_s: float, qid: str, *rest: object
) -> tuple[str, RequestContext, dict[str, Any]]:
    return (
        "mcpx.approval",
        ctx,
        {"mcp.method.name": "elicitation/create", "mcpx.upstream": upstream, "mcpx.question.id": qid},
    )


def mrtr_round(
    _self: object, ctx: RequestContext, requests: dict[str, Any], server: object
) -> tuple[str, RequestContext, dict[str, Any]]:
    return "mcpx.mrtr_round", ctx, {"mcpx.upstream": _key(server), "mcpx.mrtr.requests": len(requests)}
