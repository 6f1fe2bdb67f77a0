"""The modal that answers one question: its form (or URL, or JSON result), checked before it is sent.

Thin over ``console.forms``: the screen builds widgets from a ``FormSpec``, reads them back into
``forms.collect`` / ``forms.parse_result``, and hands the ``Answer`` to ``submit`` (which posts it).
``submit`` returns None when the daemon took it (the screen closes with the answer), else the
refusal by key (``content.<field>`` next to the field, anything else at the top). Upstream text is
never read as markup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import (
    Button,
    Checkbox,
    Input,
    Label,
    RadioButton,
    RadioSet,
    Select,
    SelectionList,
    Static,
    TextArea,
)

from console.forms import Answer, FieldSpec, RawValue, collect, form_spec, parse_result, split_errors

Submit = Callable[[Answer], Awaitable[dict[str, str] | None]]
_PLACEHOLDERS = {"number": "a number", "integer": "a whole number"}


def _widget(fs: FieldSpec) -> Widget:
    wid = f"field-{fs.key}"
    titles = [escape(o.title) for o in fs.options]
    if fs.widget == "switch":  # a labelled box ([X] Approve?), readable in any terminal; a Switch is a bare block
        return Checkbox(Text(fs.label), value=bool(fs.initial), id=wid)
    if fs.widget == "radio":
        return RadioSet(
            *(RadioButton(t, value=o.value == fs.initial) for t, o in zip(titles, fs.options, strict=True)), id=wid
        )
    if fs.widget == "select":
        options = [(t, o.value) for t, o in zip(titles, fs.options, strict=True)]
        initial = fs.initial if isinstance(fs.initial, str) else Select.NULL
        return Select(options, value=initial, allow_blank=True, prompt="(no answer)", id=wid)
    if fs.widget == "multi":
        chosen = fs.initial if isinstance(fs.initial, list) else []
        return SelectionList[str](
            *((t, o.value, o.value in chosen) for t, o in zip(titles, fs.options, strict=True)), id=wid
        )
    hint = _PLACEHOLDERS.get(fs.widget, "")
    return Input(str(fs.initial or ""), placeholder=hint, id=wid)


def _raw(fs: FieldSpec, w: Widget) -> RawValue:
    if isinstance(w, Checkbox):
        return w.value
    if isinstance(w, RadioSet):
        return fs.options[w.pressed_index].value if w.pressed_index >= 0 else None
    if isinstance(w, Select):
        return None if w.is_blank() else str(w.value)
    if isinstance(w, SelectionList):
        chosen = set(w.selected)
        return [o.value for o in fs.options if o.value in chosen]
    return w.value if isinstance(w, Input) else None


class QuestionForm(Vertical):
    """One question's part of a screen: what is asked, by whom, its fields (or URL, or JSON result),
    and its errors. Reads itself back into an ``Answer``; ids are unique within it, so a screen
    can hold several (``TaskAnswersScreen``)."""

    DEFAULT_CSS = """
    QuestionForm { height: auto; }
    QuestionForm #title { text-style: bold; }
    QuestionForm #warning { color: $warning; }
    QuestionForm #why { color: $text-muted; text-style: italic; }
    QuestionForm .label { margin-top: 1; }
    QuestionForm Checkbox { margin-top: 1; }
    QuestionForm .help { color: $text-muted; }
    QuestionForm .error { color: $error; display: none; }
    QuestionForm .error.-shown { display: block; }
    QuestionForm TextArea { height: auto; max-height: 12; }
    QuestionForm #done { color: $success; display: none; }
    QuestionForm.-done #done { display: block; }
    """

    def __init__(self, question: Mapping[str, Any], *, title: str | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.question = question
        self.closed: str | None = None  # why it can no longer be answered here (answered elsewhere)
        self.spec = form_spec(question)
        self.title = title or self.spec.title
        self.sent: Answer | None = None  # taken by the daemon

    def compose(self) -> ComposeResult:
        spec = self.spec
        yield Static(self.title, id="title", markup=False)
        yield Static(spec.warning, id="warning", markup=False)
        if self.question.get("why"):  # who it was put to and why, the daemon's line
            yield Static(str(self.question["why"]), id="why", markup=False)
        if spec.message:
            yield Static(spec.message, id="message", markup=False)
        if spec.arguments is not None:  # whole, in a box that scrolls: what is approved is all seen
            yield Label(spec.arguments_note, id="arguments-note", classes="label", markup=False)
            yield TextArea(spec.arguments, read_only=True, soft_wrap=True, id="arguments")
        yield Static(spec.problem or "", id="top-error", classes="error", markup=False)
        yield Static("", id="done", markup=False)
        for fs in spec.fields:
            # The hint (format, bounds) between the label and its field: under the field it read as the next one's.
            if fs.widget != "switch":
                yield Label(fs.label, classes="label", markup=False)
            if fs.help:
                yield Static(fs.help, id=f"help-{fs.key}", classes="help", markup=False)
            yield _widget(fs)
            yield Static("", id=f"error-{fs.key}", classes="error field-error", markup=False)
        if spec.url is not None:
            yield Label("Open this address, finish there, then choose Done:", classes="label")
            yield TextArea(spec.url, read_only=True, soft_wrap=True, id="url")
        if spec.result_template is not None:
            yield Label("The result object (JSON):", classes="label")
            yield TextArea(spec.result_template, id="result")
            yield Static("", id="error-result", classes="error field-error", markup=False)

    def on_mount(self) -> None:
        self.query_one("#top-error").set_class(self.spec.problem is not None, "-shown")

    def first_input(self) -> Widget | None:
        first = [f"#field-{fs.key}" for fs in self.spec.fields[:1]]
        for found in (self.query(selector) for selector in [*first, "#result"]):
            if found and found.first().focusable:
                return found.first()
        return None

    def read(self) -> tuple[Answer | None, dict[str, str]]:
        """The accept answer as filled in, or the errors (by daemon key) that keep it from going."""
        spec = self.spec
        if spec.problem is not None:
            return None, {"": spec.problem}
        if spec.url is not None:
            return Answer("accept"), {}
        if spec.result_template is not None:
            result, problem = parse_result(self.query_one("#result", TextArea).text)
            return (None, {"result": problem or ""}) if result is None else (Answer("accept", result=result), {})
        raw = {fs.name: _raw(fs, self.query_one(f"#field-{fs.key}")) for fs in spec.fields}
        content, errors = collect(spec, raw)
        if errors:
            return None, {f"content.{k}" if k else "": v for k, v in errors.items()}
        return Answer("accept", content=content), {}

    def show(self, errors: Mapping[str, str]) -> bool:
        """Errors by daemon key next to their fields (the first one focused), the rest at the top;
        True when there were any."""
        by_key, general = split_errors(self.spec, errors)
        shown: list[str] = []
        for error in self.query(".field-error").results(Static):
            key = (error.id or "").removeprefix("error-")
            error.update(by_key.get(key, ""))
            shown += [key] if key in by_key else []
        general += [why for key, why in by_key.items() if key not in shown]  # keys with no widget
        self.query_one("#top-error", Static).update("\n".join(filter(None, [self.spec.problem, *general])))
        for error in self.query(".error").results(Static):
            error.set_class(bool(str(error.content)), "-shown")
        if shown:
            self.query_one("#result" if shown[0] == "result" else f"#field-{shown[0]}").focus()
        return bool(shown or general)

    def mark_closed(self, why: str) -> None:
        """Answered (or closed) elsewhere: said so, and its fields no longer editable."""
        self.closed = why
        self.query_one("#done", Static).update(why)
        self.add_class("-done")
        for widget in self.query("Input, Checkbox, RadioSet, Select, SelectionList, TextArea"):
            widget.disabled = True

    def mark_sent(self, answer: Answer) -> None:
        """Taken by the daemon: said so, and its fields no longer editable."""
        self.sent = answer
        self.query_one("#done", Static).update(f"answered: {answer.action}")
        self.add_class("-done")
        for widget in self.query("Input, Checkbox, RadioSet, Select, SelectionList, TextArea"):
            widget.disabled = True


class AnswerScreen(ModalScreen[Answer | None]):
    """Answer ``question`` (as ``GET /v1/questions/{id}`` returns it); dismissed with the Answer sent, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: inputs and text areas bind ctrl+d (delete right) and ctrl+x (cut) themselves
        Binding("ctrl+s", "accept", "Accept", priority=True),
        Binding("ctrl+d", "decline", "Decline", priority=True),
        Binding("ctrl+x", "cancel_question", "Cancel question", priority=True),
        Binding("escape", "close", "Close without answering"),
    ]
    DEFAULT_CSS = """
    AnswerScreen, TaskAnswersScreen { align: center middle; }
    AnswerScreen #dialog, TaskAnswersScreen #dialog { width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1; }
    AnswerScreen .help, TaskAnswersScreen .help { color: $text-muted; }
    AnswerScreen #buttons, TaskAnswersScreen #buttons { height: auto; margin-top: 1; }
    AnswerScreen #buttons Button, TaskAnswersScreen #buttons Button { margin-right: 1; }
    TaskAnswersScreen QuestionForm { border-top: solid $panel-lighten-2; margin-top: 1; }
    """

    def __init__(self, question: Mapping[str, Any], submit: Submit) -> None:
        super().__init__()
        self.form = QuestionForm(question, id="question")
        self.spec = self.form.spec
        self._submit = submit
        self._busy = False

    def compose(self) -> ComposeResult:
        spec = self.spec
        with VerticalScroll(id="dialog"):
            yield self.form
            with Horizontal(id="buttons"):
                label = "Done" if spec.url is not None else "Accept"
                yield Button(label, id="accept", variant="primary", disabled=spec.problem is not None)
                yield Button("Decline", id="decline")
                yield Button("Cancel question", id="cancel", variant="warning")
                yield Button("Close", id="close")
            yield Static("ctrl+s accept · ctrl+d decline · ctrl+x cancel question · esc close", classes="help")

    def on_mount(self) -> None:
        first = self.form.first_input()
        for widget in [first] if first is not None else [*self.query("#accept"), *self.query("#decline")]:
            if widget.focusable:
                widget.focus()
                return

    @on(Input.Submitted)
    def _next(self) -> None:
        self.focus_next()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        actions = {"accept": self.action_accept, "decline": self.action_decline, "cancel": self.action_cancel_question}
        actions["close"] = self.action_close
        if event.button.id in actions:
            actions[event.button.id]()

    def closed_elsewhere(self, question_id: str, why: str) -> None:
        """Its question was answered by someone else (another console, a link, the host): shown
        at once, never a silent 409 on the next key."""
        if self.form.question.get("id") != question_id or self.form.closed is not None:
            return
        self.form.mark_closed(why)
        for button in self.query("#accept, #decline, #cancel").results(Button):
            button.disabled = True

    def action_accept(self) -> None:
        if self._busy or self.spec.problem is not None or self.form.closed is not None:
            return
        self.form.show({})
        answer, errors = self.form.read()
        if answer is None:
            self.form.show(errors)
        else:
            self._send(answer)

    def action_decline(self) -> None:
        if self.form.closed is None:
            self._send(Answer("decline"))

    def action_cancel_question(self) -> None:
        if self.form.closed is None:
            self._send(Answer("cancel"))

    def action_close(self) -> None:
        if not self._busy:
            self.dismiss(None)

    def _send(self, answer: Answer) -> None:
        if self._busy:
            return
        self._busy = True
        self.run_worker(self._deliver(answer), group="submit", exclusive=True)

    async def _deliver(self, answer: Answer) -> None:
        try:
            refused = await self._submit(answer)
        except Exception as exc:  # noqa: BLE001 - a failed post (daemon gone, network) is shown; the console stays up
            refused = {"": f"not sent: {exc}"}
        finally:
            self._busy = False
        if refused is None:
            self.dismiss(answer)
        else:
            self.form.show(refused)


SubmitTo = Callable[[str, Answer], Awaitable[dict[str, str] | None]]


class TaskAnswersScreen(AnswerScreen):
    """Several open questions of one task in one screen: each answered on its own (the "Accept
    this one" under its form, or from the answer queue), or all together (ctrl+s: every form checked first, nothing
    sent while one has an error; then each sent, those the daemon refuses kept open with why).
    Decline and cancel apply to every question not answered yet. Dismissed with the last answer
    once every question is answered."""

    def __init__(self, questions: list[Mapping[str, Any]], submit_to: SubmitTo) -> None:
        ModalScreen.__init__(self)
        n = len(questions)
        self.forms = [
            QuestionForm(q, title=f"{i + 1} of {n}: {form_spec(q).title}", id=f"question-{i + 1}")
            for i, q in enumerate(questions)
        ]
        self.form = self.forms[0]
        self.spec = self.form.spec
        self._submit_to = submit_to
        self._busy = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(f"This task asks {len(self.forms)} things; answer them together or one by one.", id="intro")
            for i, form in enumerate(self.forms):
                yield form
                yield Button("Accept this one", id=f"accept-{i + 1}", classes="accept-one")
            with Horizontal(id="buttons"):
                yield Button("Accept all", id="accept", variant="primary")
                yield Button("Decline all", id="decline")
                yield Button("Cancel all", id="cancel", variant="warning")
                yield Button("Close", id="close")
            yield Static(
                "ctrl+s accept all · ctrl+d decline all · ctrl+x cancel all · esc close (answered ones stay answered)",
                classes="help",
            )

    @on(Button.Pressed, ".accept-one")
    def _accept_one(self, event: Button.Pressed) -> None:
        event.stop()
        form = self.forms[int((event.button.id or "").removeprefix("accept-")) - 1]
        if self._busy or form.sent is not None:
            return
        form.show({})
        answer, errors = form.read()
        if answer is None:
            form.show(errors)
        else:
            self._send_all([(form, answer)])

    def _open_forms(self) -> list[QuestionForm]:
        return [f for f in self.forms if f.sent is None and f.closed is None]

    def closed_elsewhere(self, question_id: str, why: str) -> None:
        for i, form in enumerate(self.forms):
            if form.question.get("id") == question_id and form.sent is None and form.closed is None:
                form.mark_closed(why)
                self.query_one(f"#accept-{i + 1}", Button).disabled = True

    def action_accept(self) -> None:
        if self._busy:
            return
        answers: list[tuple[QuestionForm, Answer]] = []
        failed = False
        for form in self._open_forms():
            form.show({})
            answer, errors = form.read()
            if answer is None:
                failed = form.show(errors) or failed
            else:
                answers.append((form, answer))
        if not failed:
            self._send_all(answers)

    def action_decline(self) -> None:
        self._send_all([(f, Answer("decline")) for f in self._open_forms()])

    def action_cancel_question(self) -> None:
        self._send_all([(f, Answer("cancel")) for f in self._open_forms()])

    def _send_all(self, answers: list[tuple[QuestionForm, Answer]]) -> None:
        if self._busy or not answers:
            return
        self._busy = True
        self.run_worker(self._deliver_all(answers), group="submit", exclusive=True)

    async def _deliver_all(self, answers: list[tuple[QuestionForm, Answer]]) -> None:
        try:
            for form, answer in answers:
                try:
                    refused = await self._submit_to(str(form.question["id"]), answer)
                except Exception as exc:  # noqa: BLE001 - shown next to its question; the console stays up
                    refused = {"": f"not sent: {exc}"}
                if refused is None:
                    form.mark_sent(answer)
                    self.query_one(f"#accept-{self.forms.index(form) + 1}", Button).disabled = True
                else:
                    form.show(refused)
        finally:
            self._busy = False
        if not self._open_forms():
            self.dismiss(answers[-1][1])
