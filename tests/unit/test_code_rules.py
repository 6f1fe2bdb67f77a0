"""House rule: every `# type: ignore` and `# noqa` says why, after it on the same line.

A bare suppression hides a finding without telling the next reader whether it still applies.
Read with tokenize, so only real comments count, never a string that mentions one.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("mcpx", "console", "tests", "bench")
# The suppression itself with its codes (`type: ignore[a, b]`, `noqa: E1, F2`); the reason follows.
PRAGMA = re.compile(
    r"#\s*(?:type:\s*ignore(?:\[[^\]]*\])?|noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?)", re.IGNORECASE
)
WORD = re.compile(r"[A-Za-z]{2,}")


def unexplained(source: str) -> list[int]:
    """Lines whose suppression comment has no words after it (other suppressions do not count)."""
    lines: list[int] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        first = PRAGMA.search(tok.string)
        if first is not None and not WORD.search(PRAGMA.sub("", tok.string[first.start() :])):
            lines.append(tok.start[0])
    return lines


@pytest.mark.parametrize(
    "line",
    [
        "x = f()  # type: ignore",
        "x = f()  # type: ignore[arg-type]",
        "x = f()  # type: ignore[arg-type]  #",
        "import a  # noqa",
        "import a  # noqa: F401",
        "import a  # noqa: F401, E402 -",
        "import a  # NOQA:F401",
        "x = f()  # type: ignore[misc]  # noqa: E501",
    ],
)
def test_a_bare_suppression_is_found(line: str) -> None:
    assert unexplained(f"y = 1\n{line}\n") == [2]


@pytest.mark.parametrize(
    "line",
    [
        "x = f()  # type: ignore[arg-type]  # a wrong type on purpose",
        "import a  # noqa: F401 - imported to see whether it is installed",
        "import a  # noqa: F401  (registers an extension)",
        "x = f()  # type: ignore[misc]  # noqa: E501 - both: a generated line",
        "x = '# type: ignore'  # a string that mentions one is not a comment",
        "x = f()  # an ordinary comment",
    ],
)
def test_a_suppression_with_its_reason_passes(line: str) -> None:
    assert unexplained(f"{line}\n") == []


def test_every_suppression_in_the_tree_says_why() -> None:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--", *FOLDERS], capture_output=True, check=True
    ).stdout.decode()
    files = [name for name in listed.split("\0") if name.endswith(".py")]
    assert len(files) > 100, "git listed too few files: is this the repository root?"
    bare = [f"{name}:{line}" for name in files for line in unexplained((ROOT / name).read_text(encoding="utf-8"))]
    assert bare == [], "say why after each `# type: ignore` / `# noqa`, on the same line"
