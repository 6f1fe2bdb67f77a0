"""The approval message's preview of the arguments (#37 item 5): whole when short; shortened so it
cannot mislead, and saying so. The full arguments are in the question's `_meta` (shown whole by the
console and the answer page: tests/console, tests/test_answer_page.py)."""

from __future__ import annotations

import json

from mcpx.host.approvals import MAX_ARGUMENTS_SHOWN, Requester, preview, question_params


def test_short_arguments_are_shown_whole() -> None:
    args = {"b": [1, 2], "a": "x"}
    assert preview(args) == json.dumps(args, sort_keys=True)


def test_a_padded_early_key_cannot_push_a_later_value_out_of_view() -> None:
    # Keys sort: "a_padding" first, then "command"; cut at 2,000 characters "command" was gone.
    args = {"a_padding": "x" * 5000, "command": "rm -rf /"}
    shown = preview(args)
    assert '"command": "rm -rf /"' in shown
    assert len(shown) < MAX_ARGUMENTS_SHOWN + 300
    assert shown.endswith(
        f"[shortened to {shown.index(' ['):,} of {len(json.dumps(args, sort_keys=True)):,} characters;"
        ' cut: "a_padding"; the console and the answer page show every argument in full]'
    )


def test_arguments_that_do_not_fit_are_named_as_left_out() -> None:
    args = {f"k{i:03}": "v" * 30 for i in range(500)}
    shown = preview(args)
    assert len(shown) < MAX_ARGUMENTS_SHOWN + 400
    assert '"k000": ' in shown and "left out: " in shown and "more; the console and the answer page" in shown


def test_the_question_carries_the_arguments_whole_and_names_mcpx_as_asking() -> None:
    args = {"a_padding": "x" * 5000, "command": "rm -rf /"}
    params = question_params(Requester("agent in ~/src", None), "fx__run", "fx", args)
    assert params["_meta"]["io.mcpx/approval"]["arguments"] == args
    assert params["message"].startswith("mcpx asks: may agent in ~/src run fx__run (on fx)? Arguments: {")
    assert [c["const"] for c in params["requestedSchema"]["properties"]["decision"]["oneOf"]] == ["allow", "deny"]
