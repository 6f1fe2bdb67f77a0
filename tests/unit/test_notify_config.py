"""The config's `notify` section: exactly `{"webhooks": [{url, secret, events}], "commands":
[{run, events}]}`, `events` defaulting to `["question.opened"]`, everything else refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.config.model import ConfigError, parse_config

SECRET = "sixteen-chars-or-more"


def notify(section: dict[str, Any]) -> Any:
    return parse_config({"notify": section}, "test.json").notify


def refused(section: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        notify(section)
    return str(info.value)


def test_nothing_is_configured_by_default() -> None:
    n = parse_config({}, "test.json").notify
    assert (n.webhooks, n.commands) == ([], [])


def test_events_default_to_question_opened() -> None:
    n = notify({"webhooks": [{"url": "https://example.com/h", "secret": SECRET}], "commands": [{"run": ["true"]}]})
    assert n.webhooks[0].events == ["question.opened"] and n.commands[0].events == ["question.opened"]


def test_any_event_kind_of_the_daemon_may_be_chosen() -> None:
    n = notify({"commands": [{"run": ["true"], "events": ["task.status", "question.answered"]}]})
    assert n.commands[0].events == ["task.status", "question.answered"]


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ({"webhook": []}, "notify.webhook: unknown key"),
        (
            {"webhooks": [{"url": "https://e.com", "secret": SECRET, "timeout": 3}]},
            "notify.webhooks.0.timeout: unknown",
        ),
        ({"webhooks": [{"url": "ftp://e.com/h", "secret": SECRET}]}, "notify.webhooks.0.url"),
        ({"webhooks": [{"url": "https://e.com/h", "secret": "short"}]}, "notify.webhooks.0.secret"),
        ({"webhooks": [{"url": "https://e.com/h"}]}, "notify.webhooks.0.secret: Field required"),
        ({"commands": [{"run": []}]}, "notify.commands.0.run"),
        ({"commands": [{"run": "notify-send hi"}]}, "notify.commands.0.run"),
        ({"commands": [{"run": ["true"], "events": ["question.asked"]}]}, "notify.commands.0.events.0"),
        ({"commands": [{"run": ["true"], "events": []}]}, "notify.commands.0.events"),
    ],
)
def test_a_bad_notify_section_is_refused_naming_the_key(section: dict[str, Any], says: str) -> None:
    assert says in refused(section)
