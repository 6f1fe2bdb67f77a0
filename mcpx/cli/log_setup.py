"""Logging for the commands that run a daemon (`mcpx daemon`, `mcpx demo`): `--log-level` and
`--log-format text|json`. JSON is one object per line for log shippers: `ts` (UTC, ISO 8601),
`level`, `logger`, `message`, and `exception` when a traceback goes with it."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

LEVELS = ("debug", "info", "warning", "error")
# HTTP client libraries that log each request's full URL (httpx: `HTTP Request: POST <url>` at INFO;
# httpcore and urllib3 at DEBUG). A webhook URL's path is often its secret (docs/notify.md), and an
# OTLP endpoint's query may carry a key: they log warnings and errors only, whatever `--log-level` says.
QUIETED = ("httpx", "httpcore", "urllib3", "requests")
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line (a traceback's newlines stay inside its string)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def add_log_options(parser: argparse.ArgumentParser, default_level: str = "info") -> None:
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=default_level,
        help=f"least severe level logged (default: {default_level})",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object per line (ts, level, logger, message, exception) for log shippers",
    )


def setup_logging(level: str, log_format: str, stream: TextIO | None = None) -> None:
    """Send every logger's records to `stream` (stderr) in the chosen format, from `level` up."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIETED:
        logging.getLogger(name).setLevel(logging.WARNING)
