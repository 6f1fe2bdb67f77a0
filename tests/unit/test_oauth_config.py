"""The `oauth` object of a server entry: Claude Code's keys and mcpx's, expanded and typo-proofed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpx.config.model import ConfigError, parse_config
from mcpx.config.oauth import OAuthConfig


def oauth_of(entry: dict[str, object], environ: dict[str, str] | None = None, base: Path | None = None) -> OAuthConfig:
    cfg = parse_config(
        {"mcpServers": {"s": {"url": "https://mcp.example.com/mcp", "oauth": entry}}}, "c", environ or {}, base
    )
    oauth = cfg.mcpServers["s"].oauth
    assert oauth is not None
    return oauth


def test_claude_codes_keys_are_honoured() -> None:
    o = oauth_of({"clientId": "abc", "callbackPort": 8080, "authServerMetadataUrl": "https://as.example.com/.well-known/oauth-authorization-server", "scopes": "read write"})  # fmt: skip
    assert (o.clientId, o.callbackPort, o.scope_list) == ("abc", 8080, ["read", "write"])


def test_variables_are_expanded_in_oauth_strings() -> None:
    o = oauth_of({"clientId": "${CID}", "clientSecret": "${SECRET:-fallback}"}, {"CID": "from-env"})
    assert (o.clientId, o.clientSecret) == ("from-env", "fallback")


def test_an_unset_variable_in_oauth_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"oauth\.clientSecret: environment variable NOPE is not set"):
        oauth_of({"clientId": "a", "clientSecret": "${NOPE}"})


def test_a_typo_in_oauth_names_the_key_it_meant() -> None:
    with pytest.raises(ConfigError, match="unknown key 'clientID' in oauth of server 's'; did you mean 'clientId'"):
        oauth_of({"clientID": "a"})


def test_gemini_clis_oauth_keys_pass_and_its_scope_list_is_taken() -> None:
    o = oauth_of({"enabled": True, "authorizationUrl": "https://x/a", "tokenUrl": "https://x/t", "scopes": ["a", "b"]})
    assert o.scope_list == ["a", "b"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"grantType": "client_credentials"}, "needs `clientId`"),
        (
            {"grantType": "client_credentials", "clientId": "c"},
            "needs `clientSecret`, `privateKey` or `privateKeyFile`",
        ),
        ({"clientSecret": "s"}, "give both"),
        ({"privateKey": "k", "privateKeyFile": "/dev/null"}, "not both"),
        ({"authServerMetadataUrl": "http://as.example.com/x"}, "https://"),
        ({"clientMetadataUrl": "https://example.com"}, "with a path"),
        ({"callbackPort": 0}, "greater than or equal to 1"),
        ({"signingAlgorithm": "HS256"}, "signingAlgorithm"),
        ({"grantType": "password"}, "grantType"),
    ],
)
def test_an_oauth_object_that_cannot_work_is_refused(entry: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        oauth_of(entry)


def test_a_metadata_url_on_loopback_may_be_http() -> None:
    assert oauth_of({"authServerMetadataUrl": "http://127.0.0.1:9/m"}).authServerMetadataUrl == "http://127.0.0.1:9/m"


def test_a_private_key_file_is_found_beside_the_config_and_must_be_readable(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text("pem")
    o = oauth_of({"grantType": "client_credentials", "clientId": "c", "privateKeyFile": "key.pem"}, base=tmp_path)
    assert o.privateKeyFile == str(tmp_path / "key.pem")
    with pytest.raises(ConfigError, match=r"cannot read its oauth\.privateKeyFile"):
        oauth_of({"grantType": "client_credentials", "clientId": "c", "privateKeyFile": "gone.pem"}, base=tmp_path)


def test_an_authorization_header_of_its_own_means_mcpx_never_signs_in() -> None:
    cfg = parse_config(
        {"mcpServers": {"s": {"url": "https://m/mcp", "headers": {"authorization": "Bearer x"}}}}, "c", {}
    )
    assert cfg.mcpServers["s"].static_authorization
