"""The `traces` and `metrics` config blocks (docs/telemetry.md), declared here beside the code
that reads them; mcpx/config/model.py only names them.

Not `telemetry`: that top-level key is Gemini CLI's own (its settings.json, which mcpx tolerates
in FOREIGN_TOP_LEVEL), so a strict block of that name would refuse a Gemini file's settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from . import urls


class TracesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        False,
        description="Export OpenTelemetry traces over OTLP/HTTP (docs/telemetry.md). Also on, whatever this says,"
        " when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (unless"
        " `OTEL_SDK_DISABLED=true`). Off: no span is made and the SDK is not even imported.",
    )
    endpoint: Annotated[str, AfterValidator(urls.check_http_url)] | None = Field(
        None,
        pattern=r"^https?://[^\s]+$",
        description="The OTLP/HTTP collector's base URL (`/v1/traces` is added), e.g. `http://127.0.0.1:4318`;"
        " unset: the `OTEL_EXPORTER_OTLP_*` variables, else the exporter's default (http://localhost:4318).",
    )
    serviceName: str = Field(
        "mcpx", min_length=1, description="`service.name` of the spans, unless `OTEL_SERVICE_NAME` is set."
    )


class MetricsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    public: bool = Field(
        False,
        description="Serve Prometheus `/metrics` without the API token (the daemon only listens on loopback), for a"
        " scraper that cannot send a bearer token. Default: `/metrics` needs the token, as `/v1` does.",
    )
    toolLabels: int = Field(
        200,
        ge=0,
        description="Distinct `tool` label values kept per upstream in the call metrics; calls to tools beyond"
        " them (and to tools no upstream lists) are counted under `other`, so a scrape stays bounded.",
    )
