"""The one error of the OAuth client: a sign-in that cannot go on, with a message for a person."""

from __future__ import annotations


class AuthError(Exception):
    """Discovery, registration, authorization or a token request failed; the message says where and why."""
