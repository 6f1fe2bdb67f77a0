"""schemathesis against the real daemon's generated OpenAPI document: whatever it sends, `/v1`
answers with a documented status and a body that matches the documented schema, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from harness import Api, Daemon, RawHost, SuiteStore, stdio_server
from hypothesis import HealthCheck, settings

api_schema = schemathesis.pytest.from_fixture("openapi")


@pytest.fixture(scope="module")
def fuzzed_daemon(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Daemon]:
    tmp: Path = tmp_path_factory.mktemp("api-fuzz")
    d = Daemon(tmp, {"mcpServers": {"fx": stdio_server(tmp)}}, name="fuzz", store=suite_store)
    d.start()
    with RawHost(d.url) as host:  # something to list: a session, a finished task, a running one
        host.initialize()
        host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "a"}, "task": {}})
        host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 60}, "task": {}})
    try:
        yield d
    finally:
        d.stop()
        d.check_wire()


@pytest.fixture(scope="module")
def openapi(fuzzed_daemon: Daemon) -> Any:
    with Api(fuzzed_daemon) as api:
        document = api.get("/v1/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    schema.config.update(base_url=f"http://127.0.0.1:{fuzzed_daemon.port}")
    return schema


@api_schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_v1_answers_everything_as_documented(case: Any, fuzzed_daemon: Daemon) -> None:
    # Where the generated request carries a token, it is the real one (a request without one must get 401).
    headers = dict(case.headers or {})
    if any(k.lower() == "authorization" for k in headers):
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        headers["Authorization"] = f"Bearer {fuzzed_daemon.token}"
    case.headers = headers
    case.call_and_validate()
