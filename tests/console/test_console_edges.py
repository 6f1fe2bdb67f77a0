"""Issue #39's console edges, driven by Textual's pilot: scrollbars that leave no stray glyphs in a
terminal with fewer colours (tmux), and a confirm dialog read whole at 80x24."""

from __future__ import annotations

import pytest
from pilot_wait import until
from snapshot_app import TASKS, make_app
from test_snapshots_polish import LONG_LABEL, ask_to_cancel_the_long_one, long_confirm_app
from textual.geometry import Region

pytestmark = pytest.mark.anyio
EIGHTHS = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


async def test_a_scrollbar_thumb_is_whole_cells_with_no_eighth_block_glyphs_at_its_ends() -> None:
    """In tmux the track took the terminal's own background, so a short thumb showed only as its
    eighth-block ends, `▅▅` at the right edge, read as a toast's remnant. Every scroll position of
    the detail pane (taller than it is) draws the thumb as reversed blank cells, and nothing else."""
    app = make_app("hosts")
    async with app.run_test(size=(100, 22)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(TASKS) and app.flushes > 0, "the snapshot's rows")
        detail = app.query_one("#detail")
        await until(pilot, lambda: detail.max_scroll_y > 2, "a detail pane taller than it is")
        bar = detail.vertical_scrollbar
        for y in range(int(detail.max_scroll_y) + 1):
            detail.scroll_to(y=y, animate=False)
            await pilot.pause()
            strips = bar.render_lines(Region(0, 0, bar.size.width, bar.size.height))
            drawn = "".join(strip.text for strip in strips)
            assert not EIGHTHS & set(drawn), (y, drawn)
            thumb = [any(seg.style is not None and seg.style.reverse for seg in strip) for strip in strips]
            assert any(thumb) and not all(thumb), (y, thumb)  # a thumb, on a track


async def test_at_80x24_the_whole_confirm_question_is_on_screen_however_long_its_names() -> None:
    """The question a cancel asks names the tool, its upstream and the host's label (up to 120
    characters): at 80x24 every word of it is rendered, wrapped inside the dialog."""
    app = long_confirm_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ask_to_cancel_the_long_one(pilot)
        box = app.screen.query_one("#confirm-question")
        question = str(box.render())
        assert LONG_LABEL in question and "trigger-long-running-operation" in question
        lines = box.render_lines(Region(0, 0, box.size.width, box.size.height))
        shown = " ".join(strip.text.strip() for strip in lines).split()
        assert shown == question.split(), (shown, question)
        dialog = app.screen.query_one("#confirm")
        # Every line of it inside the dialog (not clipped at its border), the dialog inside the screen.
        assert dialog.content_region.contains_region(box.region), (dialog.content_region, box.region)
        assert app.screen.region.contains_region(dialog.region)
