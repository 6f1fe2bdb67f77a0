"""Bearer tokens: digests only, the right principal, nothing for a near miss."""

from __future__ import annotations

import pytest

from mcpx.config.model import ConfigError, parse_config, sha256_hex
from mcpx.host.auth import TokenTable

ALICE = "a" * 20
BOB = "b" * 20


def table() -> TokenTable:
    return TokenTable([(sha256_hex(ALICE), "alice"), (sha256_hex(BOB), "bob")])


def test_each_token_names_its_principal() -> None:
    t = table()
    assert t.enabled and t.principal_for(ALICE) == "alice" and t.principal_for(BOB) == "bob"


@pytest.mark.parametrize("presented", ["", ALICE[:-1], ALICE + "a", ALICE.upper(), sha256_hex(ALICE), "\udcff"])
def test_near_misses_and_the_digest_itself_name_nobody(presented: str) -> None:
    assert table().principal_for(presented) is None


def test_no_tokens_means_auth_is_off() -> None:
    assert not TokenTable([]).enabled


def test_config_tokens_plain_or_by_digest_give_the_same_digest() -> None:
    cfg = parse_config(
        {
            "auth": {
                "tokens": [
                    {"principal": "a", "token": ALICE},
                    {"principal": "b", "tokenSha256": sha256_hex(BOB).upper()},
                ]
            }
        },
        "c",
    )
    assert cfg.auth is not None
    assert [t.digest for t in cfg.auth.tokens] == [sha256_hex(ALICE), sha256_hex(BOB)]


@pytest.mark.parametrize(
    "entry",
    [
        {"principal": "a"},
        {"principal": "a", "token": ALICE, "tokenSha256": sha256_hex(ALICE)},
        {"principal": "a", "tokenSha256": "abc"},
    ],
)
def test_a_token_entry_needs_exactly_one_well_formed_secret(entry: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        parse_config({"auth": {"tokens": [entry]}}, "c")
