"""The console's pure layout and helpers (#29): column widths by priority, the hosts pane's counts
broken only between counts, the sort marker, the glyphs every font draws one cell wide, the
`mcpx` command a row copies, and the remembered settings."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from rich.text import Text

from console import settings
from console.cli_equivalent import host_command, question_command, task_command
from console.state import Host, Question, TaskRow
from console.widgets.columns import COLUMN_SPECS, PADDING, SCROLLBAR, header, widths
from console.widgets.hosts import counts_lines

CONSOLE = Path(__file__).resolve().parents[2] / "console"

# ---- columns -------------------------------------------------------------------------------------


@pytest.mark.parametrize("table_width", [80, 100, 146, 180, 240])
def test_columns_fill_the_table_and_each_keeps_at_least_its_least(table_width: int) -> None:
    sized = widths(table_width)
    assert sum(sized.values()) + PADDING * len(COLUMN_SPECS) + SCROLLBAR == table_width
    assert all(sized[c.key] >= c.least for c in COLUMN_SPECS)


def test_at_80_columns_tool_upstream_host_and_age_all_stay_on_screen() -> None:
    sized = widths(80)
    assert sized["age"] >= 6 and sized["host"] >= 8 and sized["upstream"] >= 7 and sized["tool"] >= 8


def test_a_wide_table_shows_tool_and_upstream_names_longer_than_the_old_cut() -> None:
    sized = widths(146)  # 180 columns less the hosts pane
    assert sized["tool"] > 14 and sized["upstream"] >= len("everything-http")


def test_only_the_sorted_column_is_marked_and_with_its_direction() -> None:
    assert header("age", "age", "age", True).plain == "age ▼"
    assert header("age", "age", "age", False).plain == "age ▲"
    assert header("tool", "tool", "age", True).plain == "tool"
    assert header("tool", "tool", "age", True).overflow == "ellipsis"


# ---- the hosts pane ------------------------------------------------------------------------------


def test_host_counts_break_between_counts_never_inside_one() -> None:
    counts = {"working": 3, "input_required": 1, "completed": 2, "failed": 1, "cancelled": 1}
    lines = counts_lines(counts, 30).plain.split("\n")
    assert all(len(line) <= 30 for line in lines)
    parts = " ".join(lines).split()
    assert parts == ["3", "working", "1", "input", "2", "completed", "1", "failed", "1", "cancelled"]
    for line in lines:  # each line holds whole "N status" pairs
        words = line.split()
        assert len(words) % 2 == 0 and all(w.isdigit() for w in words[::2])


# ---- glyphs --------------------------------------------------------------------------------------

# Non-ASCII characters the console may draw: each one cell wide in the common monospace fonts
# (DejaVu Sans Mono, Fira Code), so an SVG rendered without the web font keeps its spacing.
ONE_CELL = set("●·—…↑↓→←▲▼▐▌│─–") | {chr(c) for c in range(0x2581, 0x2589)}


def test_the_console_draws_no_glyph_that_some_fonts_draw_wide() -> None:
    """⚑ (the old "asks" flag) fell back to a wide emoji font and ate the space after it."""
    found: dict[str, str] = {}
    for path in sorted(CONSOLE.rglob("*.py")):
        for ch in path.read_text():
            if ord(ch) > 127 and ch not in ONE_CELL and unicodedata.category(ch).startswith("S"):
                found[ch] = path.name
    assert found == {}


# ---- the mcpx command a row copies ---------------------------------------------------------------


def _row(status: str) -> TaskRow:
    return TaskRow("T1", status, "deploy", "demo", "legacy", "c1", 0, 0)


def _question(schema: object) -> Question:
    wire = {"params": {"message": "m", "requestedSchema": schema}}
    return Question("Q1", "elicitation", "demo", 0, "T1", "c1", "m", wire)


def test_a_running_task_copies_its_cancel_and_an_ended_one_its_show() -> None:
    assert task_command(_row("working"), []) == "mcpx tasks cancel T1"
    assert task_command(_row("completed"), []) == "mcpx tasks show T1"


def test_a_task_that_asks_copies_the_answer_with_its_fields() -> None:
    schema = {"properties": {"approve": {"type": "boolean"}, "env": {"type": "string", "enum": ["a", "b"]}}}
    command = task_command(_row("input_required"), [_question(schema)])
    assert command == "mcpx questions answer Q1 --accept 'approve=true|false' 'env=a|b'"


def test_a_question_that_is_no_form_copies_a_decline_to_edit() -> None:
    assert question_command(_question(None)) == "mcpx questions answer Q1 --decline"


def test_a_host_copies_its_task_listing() -> None:
    host = Host("c9", "session", "http", None, "ide", "1", None, None, 0)
    assert host_command(host) == "mcpx tasks ls --connection c9"
    assert host_command(None) == "mcpx tasks ls"


# ---- settings ------------------------------------------------------------------------------------


def test_settings_live_under_xdg_config_home() -> None:
    assert settings.settings_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/mcpx/console.json")


def test_a_setting_saved_is_loaded_and_other_keys_stay(tmp_path: Path) -> None:
    path = tmp_path / "mcpx" / "console.json"
    assert settings.load(path) == {}
    path.parent.mkdir()
    path.write_text('{"future": 1}')
    settings.save(path, theme="nord")
    assert settings.load(path) == {"future": 1, "theme": "nord"}
    path.write_text("not json")
    assert settings.load(path) == {}


def test_header_text_is_plain_text() -> None:
    assert isinstance(header("id", "id", "age", True), Text)
