"""`:questions`: every open question, oldest first, with why it went where it went (the daemon's
line); enter opens its form."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ..render import age
from ..state import Question
from .view_screen import Row, ViewScreen


class QuestionsScreen(ViewScreen):
    view = "questions"
    columns = ("age", "kind", "upstream", "host", "asks", "why")

    def rows(self) -> list[Row]:
        text = self.filter_text.lower()
        out: list[Row] = []
        for q in self.state.answer_queue():
            host = self.state.hosts.get(q.connection or "")
            cells = (
                age(q.created_ms),
                q.kind,
                q.upstream,
                host.label if host is not None else "-",
                q.message,
                Text(str(q.wire.get("why") or ""), style="italic"),
            )
            if not text or text in " ".join(map(str, cells)).lower():
                out.append((q.id, cells))
        return out

    def open(self, key: str) -> None:
        q = self.state.questions.get(key)
        answer: Any = getattr(self.app, "answer", None)
        if isinstance(q, Question) and answer is not None:
            answer(q, "enter")
