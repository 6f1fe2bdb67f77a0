"""Environment variables in a server entry, as other hosts expand them: `${VAR}` and `${VAR:-default}`
(Claude Code's `.mcp.json`), `${env:VAR}` (VS Code, Cursor), in `command`, `args`, `env`, `cwd`, `url`,
`headers` and the strings of `oauth`; and VS Code's `envFile` (and `oauth.privateKeyFile`, made absolute
against the config file's folder and checked readable). An unset variable with no default is an error naming it and
the server, never an empty string or the literal text passed on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# ${NAME}, ${NAME:-default}, ${env:NAME}; any other ${...} (VS Code's ${input:id}, ${workspaceFolder}) is named.
_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.S)

Where = tuple[str | int, ...]


def expand_servers(
    servers: Mapping[str, Any], environ: Mapping[str, str], base_dir: Path | None
) -> tuple[dict[str, Any], list[tuple[Where, str]]]:
    """A copy of `mcpServers` with variables expanded and `envFile` read; the problems, each where it is."""
    out: dict[str, Any] = {}
    problems: list[tuple[Where, str]] = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            out[name] = entry  # the model says what is wrong with it
            continue
        expanded = dict(entry)
        for key in ("command", "cwd", "url", "serverUrl", "httpUrl", "envFile"):
            if isinstance(entry.get(key), str):
                expanded[key] = _expand(entry[key], environ, ("mcpServers", name, key), name, problems)
        if isinstance(entry.get("args"), list):
            expanded["args"] = [
                _expand(a, environ, ("mcpServers", name, "args", i), name, problems) if isinstance(a, str) else a
                for i, a in enumerate(entry["args"])
            ]
        for key in ("env", "headers"):
            if isinstance(entry.get(key), dict):
                expanded[key] = {
                    k: _expand(v, environ, ("mcpServers", name, key, k), name, problems) if isinstance(v, str) else v
                    for k, v in entry[key].items()
                }
        if isinstance(entry.get("oauth"), dict):
            expanded["oauth"] = _expand_oauth(entry["oauth"], environ, name, base_dir, problems)
        env_file = expanded.get("envFile")
        if isinstance(env_file, str) and env_file:
            from_file = _read_env_file(env_file, base_dir, ("mcpServers", name, "envFile"), name, problems)
            if isinstance(expanded.get("env", {}), dict):
                expanded["env"] = {**from_file, **expanded.get("env", {})}  # `env` wins over the file
        out[name] = expanded
    return out, problems


def _expand_oauth(
    oauth: dict[str, Any],
    environ: Mapping[str, str],
    server: str,
    base_dir: Path | None,
    problems: list[tuple[Where, str]],
) -> dict[str, Any]:
    out = {
        k: _expand(v, environ, ("mcpServers", server, "oauth", k), server, problems) if isinstance(v, str) else v
        for k, v in oauth.items()
    }
    key_file = out.get("privateKeyFile")
    if isinstance(key_file, str) and key_file:
        path = Path(key_file).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            path.read_bytes()
        except OSError as exc:
            where = ("mcpServers", server, "oauth", "privateKeyFile")
            problems.append(
                (where, f"server {server!r}: cannot read its oauth.privateKeyFile {str(path)!r}: {exc.strerror}")
            )
        out["privateKeyFile"] = str(path)
    return out


def _expand(text: str, environ: Mapping[str, str], where: Where, server: str, problems: list[tuple[Where, str]]) -> str:
    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        parsed = _NAME.fullmatch(inner)
        if inner.startswith("input:"):
            problems.append(
                (where, f"{match.group(0)} in server {server!r} is a VS Code prompt; mcpx cannot prompt: use ${{VAR}}")
            )
            return match.group(0)
        if parsed is None:
            problems.append((where, f"{match.group(0)} in server {server!r}: not a variable mcpx can expand"))
            return match.group(0)
        name, default = parsed.group(1), parsed.group(2)
        value = environ.get(name)
        if value is not None and (value or default is None):
            return value
        if default is not None:  # `:-`: unset or empty takes the default, as in a shell
            return default
        problems.append(
            (
                where,
                f"environment variable {name} is not set (server {server!r} uses {match.group(0)}); set it where the"
                f" daemon starts, or give a default: ${{{name}:-value}}",
            )
        )
        return match.group(0)

    return _REFERENCE.sub(one, text)


def unset_variables(entry: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The `${VAR}`s (no default) in one server entry's expanded fields that `environ` lacks, each once:
    what a daemon with that environment would refuse the file for."""
    texts: list[object] = [entry.get(key) for key in ("command", "cwd", "url", "serverUrl", "httpUrl", "envFile")]
    texts += entry.get("args") or [] if isinstance(entry.get("args"), list) else []
    for key in ("env", "headers"):
        if isinstance(entry.get(key), dict):
            texts += list(entry[key].values())
    names: list[str] = []
    for text in texts:
        for match in _REFERENCE.finditer(text) if isinstance(text, str) else ():
            parsed = _NAME.fullmatch(match.group(1))
            if parsed is None or match.group(1).startswith("input:") or parsed.group(2) is not None:
                continue  # not a variable (said elsewhere), or one with a default
            if parsed.group(1) not in environ and match.group(0) not in names:
                names.append(match.group(0))
    return names


def _read_env_file(
    path_text: str, base_dir: Path | None, where: Where, server: str, problems: list[tuple[Where, str]]
) -> dict[str, str]:
    path = Path(path_text).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path  # relative to the config file, as a file beside it is meant
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        problems.append((where, f"server {server!r}: cannot read its envFile {str(path)!r}: {exc.strerror or exc}"))
        return {}
    except ValueError as exc:  # not UTF-8 (UnicodeDecodeError), or a NUL in the path
        problems.append((where, f"server {server!r}: cannot use its envFile {str(path)!r}: {exc}"))
        return {}
    return parse_env_file(text)


def parse_env_file(text: str) -> dict[str, str]:
    """`KEY=value` lines of a dotenv file: `#` comments, blank lines, an `export ` prefix, quotes around a value."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values
