"""Scrollbars whose thumb covers whole cells, the same in every terminal.

Textual draws a thumb's ends as eighth-block glyphs (U+2581-2587 lower, U+2589-258F left eighths) in
the track's colour. Where the track does not show as such (a 256- or 16-colour terminal such as
tmux's maps it to the terminal's own background), a short thumb is only those glyphs: two of them at
the right edge, read as something a toast left on screen (#39). Blank glyphs keep the positions (eighths) and draw the thumb as the cells it
covers. `ScrollBar.renderer` is Textual's documented hook for this."""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender


class WholeCellScrollBarRender(ScrollBarRender):
    VERTICAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.VERTICAL_BARS)
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.HORIZONTAL_BARS)


def use_whole_cell_scrollbars() -> None:
    ScrollBar.renderer = WholeCellScrollBarRender
