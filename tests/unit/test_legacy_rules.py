"""mcpx.protocol.legacy (+ revisions.negotiate_legacy): the initialize handshake and log filtering."""

from __future__ import annotations

from typing import Any

import pytest
from wire_schema import check_frame

from mcpx.protocol import jsonrpc, legacy
from mcpx.protocol.errors import InvalidParams
from mcpx.protocol.revisions import LEGACY_LATEST, LEGACY_VERSIONS, negotiate_legacy

CAPS = {"tools": {"listChanged": True}, "logging": {}}
SERVER_INFO = {"name": "mcpx", "version": "0.1.0"}
CLIENT_INFO = {"name": "host", "version": "1.0"}


def init(version: Any = "2025-11-25", **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}
    p.update(extra)
    return p


# ---- version negotiation ------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_initialize_with_a_version_mcpx_speaks_gets_that_same_version(version: str) -> None:
    # 2025-11-25/basic/lifecycle.mdx:170-171: a supported version MUST be echoed.
    revision, res = legacy.initialize_result(init(version), CAPS, SERVER_INFO, None)
    assert revision == version and res["protocolVersion"] == version


@pytest.mark.parametrize("version", ["2024-11-05", "2026-07-28", "1900-01-01", "", "latest"])
def test_initialize_with_a_version_mcpx_does_not_speak_gets_the_latest_legacy_version(version: str) -> None:
    # lifecycle.mdx:171-172: otherwise answer another supported version, SHOULD be the latest. A modern
    # version over initialize still gets a legacy one: 2026-07-28 has no handshake.
    revision, res = legacy.initialize_result(init(version), CAPS, SERVER_INFO, None)
    assert revision == res["protocolVersion"] == LEGACY_LATEST == "2025-11-25"


@pytest.mark.parametrize("version", [None, 20251125, ["2025-06-18"]])
def test_initialize_with_a_non_string_version_gets_the_latest_legacy_version(version: Any) -> None:
    assert legacy.initialize_result(init(version), CAPS, SERVER_INFO, None)[0] == LEGACY_LATEST


def test_initialize_without_a_version_gets_the_latest_legacy_version() -> None:
    p = init()
    del p["protocolVersion"]
    assert legacy.initialize_result(p, CAPS, SERVER_INFO, None)[0] == LEGACY_LATEST


def test_legacy_versions_are_listed_newest_first_and_negotiation_prefers_the_newest() -> None:
    assert list(LEGACY_VERSIONS) == sorted(LEGACY_VERSIONS, reverse=True)
    assert negotiate_legacy("nope") == LEGACY_VERSIONS[0]


# ---- InitializeResult ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2099-01-01"])
def test_initialize_result_is_schema_valid(version: str) -> None:
    revision, res = legacy.initialize_result(init(version), CAPS, SERVER_INFO, "Use the tools.")
    check_frame(jsonrpc.result(1, res), revision, request_method="initialize")


def test_initialize_result_carries_capabilities_and_server_info_at_top_level() -> None:
    _, res = legacy.initialize_result(init(), CAPS, SERVER_INFO, None)
    assert res == {"protocolVersion": "2025-11-25", "capabilities": CAPS, "serverInfo": SERVER_INFO}


def test_initialize_result_includes_instructions_only_when_there_are_some() -> None:
    assert legacy.initialize_result(init(), CAPS, SERVER_INFO, "hi")[1]["instructions"] == "hi"
    assert "instructions" not in legacy.initialize_result(init(), CAPS, SERVER_INFO, "")[1]
    assert "instructions" not in legacy.initialize_result(init(), CAPS, SERVER_INFO, None)[1]


@pytest.mark.parametrize("caps", [None, [], "all", 1])
def test_initialize_with_capabilities_that_are_not_an_object_is_invalid_params(caps: Any) -> None:
    with pytest.raises(InvalidParams) as exc:
        legacy.initialize_result(init(capabilities=caps), CAPS, SERVER_INFO, None)
    assert exc.value.code == -32602
    check_frame(jsonrpc.error_from(1, exc.value), "2025-11-25")


@pytest.mark.parametrize("info", [None, "host", ["host"]])
def test_initialize_with_client_info_that_is_not_an_object_is_invalid_params(info: Any) -> None:
    with pytest.raises(InvalidParams):
        legacy.initialize_result(init(clientInfo=info), CAPS, SERVER_INFO, None)


def test_initialize_tolerates_missing_capabilities_and_client_info() -> None:
    assert legacy.initialize_result({"protocolVersion": "2025-06-18"}, CAPS, SERVER_INFO, None)[0] == "2025-06-18"


# ---- log level filtering ------------------------------------------------------------------


def test_log_levels_follow_rfc_5424_from_least_to_most_severe() -> None:
    assert legacy.LOG_LEVELS == ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@pytest.mark.parametrize("level", legacy.LOG_LEVELS)
def test_without_set_level_every_message_is_sent(level: str) -> None:
    assert legacy.log_level_allows(None, level)


@pytest.mark.parametrize("threshold", legacy.LOG_LEVELS)
def test_a_message_at_the_threshold_is_sent(threshold: str) -> None:
    assert legacy.log_level_allows(threshold, threshold)


@pytest.mark.parametrize(
    ("threshold", "level", "allowed"),
    [
        ("warning", "error", True),
        ("warning", "emergency", True),
        ("warning", "notice", False),
        ("warning", "debug", False),
        ("debug", "debug", True),
        ("debug", "info", True),
        ("emergency", "alert", False),
        ("error", "warning", False),
    ],
)
def test_only_messages_at_or_above_the_threshold_are_sent(threshold: str, level: str, allowed: bool) -> None:
    assert legacy.log_level_allows(threshold, level) is allowed


def test_every_level_pair_matches_severity_order() -> None:
    for ti, threshold in enumerate(legacy.LOG_LEVELS):
        for li, level in enumerate(legacy.LOG_LEVELS):
            assert legacy.log_level_allows(threshold, level) is (li >= ti)
