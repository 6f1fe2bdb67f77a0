"""Render the config reference (Markdown) from the pydantic models, so README and code agree."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .doc_blocks import rewrite_block
from .model import (
    AuthConfig,
    AuthToken,
    CallsConfig,
    Config,
    ConnectionsConfig,
    DaemonConfig,
    EventsConfig,
    FramesConfig,
    KeepersConfig,
    McpxServerOptions,
    NotifyCommand,
    NotifyConfig,
    NotifyWebhook,
    OAuthConfig,
    QuestionsConfig,
    ServerConfig,
    StoreConfig,
    TasksConfig,
    ToolOverride,
)
from .telemetry import MetricsConfig, TracesConfig

SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("top level", Config),
    ("`mcpServers.<name>`", ServerConfig),
    ("`mcpServers.<name>.oauth`", OAuthConfig),
    ("`mcpServers.<name>.mcpx`", McpxServerOptions),
    ("`mcpServers.<name>.mcpx.tools.<tool>`", ToolOverride),
    ("`daemon`", DaemonConfig),
    ("`tasks`", TasksConfig),
    ("`calls`", CallsConfig),
    ("`questions`", QuestionsConfig),
    ("`connections`", ConnectionsConfig),
    ("`events`", EventsConfig),
    ("`frames`", FramesConfig),
    ("`keepers`", KeepersConfig),
    ("`store`", StoreConfig),
    ("`auth`", AuthConfig),
    ("`auth.tokens[]`", AuthToken),
    ("`notify`", NotifyConfig),
    ("`notify.webhooks[]`", NotifyWebhook),
    ("`notify.commands[]`", NotifyCommand),
    ("`traces`", TracesConfig),
    ("`metrics`", MetricsConfig),
]


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.get_default(call_default_factory=True, validated_data={})
        return "`{}`" if value == {} else "`[]`" if value == [] else "see below"
    return "—" if field.default is None else "`" + json.dumps(field.default) + "`"


def render() -> str:
    out = []
    for title, model in SECTIONS:
        out.append(f"#### {title}\n")
        out.append("| key | default | meaning |")
        out.append("|---|---|---|")
        for name, field in model.model_fields.items():
            out.append(f"| `{name}` | {_default(field)} | {field.description or ''} |")
        out.append("")
    return "\n".join(out)


def update_readme(path: Path) -> bool:
    """Rewrite the README's generated block; True when it changed."""
    return rewrite_block(path, "config-reference", render())


README = Path(__file__).resolve().parents[2] / "README.md"  # the checkout's, beside mcpx/

if __name__ == "__main__":
    update_readme(README)
