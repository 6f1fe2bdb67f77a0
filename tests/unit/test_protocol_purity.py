"""House rule: mcpx/protocol/ does no I/O. Every module there is pure functions over plain data.

Checked statically with `ast`, so a violation is caught even in code no other test reaches.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mcpx.protocol

PROTOCOL_DIR = Path(mcpx.protocol.__file__).resolve().parent
FORBIDDEN = frozenset(
    {
        "asyncio",
        "anyio",
        "socket",
        "httpx",
        "aiosqlite",
        "sqlite3",
        "websockets",
        "starlette",
        "uvicorn",
        "subprocess",
        "os",
        "time",
    }
)
# Builtins that read or write the outside world (print to stdout would even corrupt stdio framing).
FORBIDDEN_CALLS = frozenset({"open", "print", "input", "__import__"})
MODULES = sorted(PROTOCOL_DIR.glob("*.py"))


def violations(source: str, filename: str = "<src>") -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.append(f"{filename}:{node.lineno}: calls {func.id}()")
            # importlib.import_module("os") and friends
            if isinstance(func, ast.Attribute) and func.attr == "import_module" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names = [arg.value]
        for name in names:
            if name.split(".")[0] in FORBIDDEN:
                found.append(f"{filename}:{node.lineno}: imports {name}")
    return found


def test_the_protocol_package_has_the_modules_this_suite_mirrors() -> None:
    names = {p.stem for p in MODULES}
    assert {"errors", "jsonrpc", "revisions", "legacy", "modern", "pagination", "shaping"} <= names


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_protocol_module_does_no_io(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8"), f"mcpx/protocol/{path.name}") == []


def test_protocol_package_has_no_subpackages_that_escape_the_check() -> None:
    assert [p.name for p in PROTOCOL_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"] == []


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "import os.path",
        "import json, socket",
        "from os import environ",
        "from time import monotonic",
        "import asyncio as aio",
        "from anyio.abc import TaskGroup",
        "from starlette.requests import Request",
        "def f():\n    import subprocess\n",
        "if TYPE_CHECKING:\n    import httpx\n",
        "try:\n    import aiosqlite\nexcept ImportError:\n    pass\n",
        "import importlib\nimportlib.import_module('sqlite3')",
        "x = __import__('websockets')",
        "import uvicorn",
        "print('hi')",
        "open('/etc/passwd')",
    ],
)
def test_checker_catches_each_kind_of_forbidden_import_or_call(source: str) -> None:
    assert violations(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import json, base64, re, binascii",
        "from typing import Any",
        "from dataclasses import dataclass",
        "from .errors import InvalidParams",
        "from . import revisions",
        "import ostruct",  # a name that merely starts with a forbidden one
        "from timeutils import x",
        "obj.open()",
    ],
)
def test_checker_allows_pure_imports(source: str) -> None:
    assert violations(source) == []
