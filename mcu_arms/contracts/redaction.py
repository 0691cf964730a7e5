"""Secrets are recognised by name and by value, before anything is shown, saved or logged.

A variable whose NAME says it is a secret (DB_PASS, HF_PAT, OPENAI_API_KEY, ...) is masked whole. Any other value is
scrubbed of what LOOKS like a secret: the password (or, without one, the user) of a URL, query and `name=value`
parameters whose name says secret (`?api_key=`, `&sig=`, `--password=`), and keys with a well-known prefix (`sk-`,
`ghp_`, `AKIA`, JWTs, PEM private keys). A mask keeps a short hash of what it hides, so that two different secrets
still differ in a comparison, and masking is idempotent: a value read back from a saved plan or report stays as is.
A limit, a count or a size is never masked: a plain number under a name that ends in a quantity word
(`model_auto_compact_token_limit=516000`) is shown as it is, whatever secret word the name also holds.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

MASK = "***"
_MASKED = re.compile(r"\*\*\*[0-9a-f]{6}")
# A name segment that ends with one of these says "secret" (APIKEY, OAUTH, GHTOKEN, DBPASSWORD).
_SECRET_SUFFIXES = (
    "KEY",
    "KEYS",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
    "SIGNATURE",
)
# Short words count only as a whole segment: PAT is not PATH, PASS is not BYPASS.
_SECRET_SEGMENTS = frozenset({"PAT", "PASS", "PW", "PWD", "CRED", "CREDS", "SIG", "PRIVATE", "BEARER"})
# Names that contain a secret word but hold none (the shell's working directories).
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
# A name whose last segment is one of these names a quantity (MODEL_AUTO_COMPACT_TOKEN_LIMIT, AUTH_RETRY_COUNT): its
# number is what users grep for and is never masked. Anything but a plain number under such a name is still judged
# as before, so a key hidden behind a quantity-sounding name stays masked.
_QUANTITY_SEGMENTS = frozenset(
    {
        "LIMIT",
        "LIMITS",
        "COUNT",
        "COUNTS",
        "SIZE",
        "SIZES",
        "MAX",
        "MIN",
        "BUDGET",
        "LEN",
        "LENGTH",
        "BYTES",
        "NUM",
        "NUMBER",
        "TURNS",
        "WINDOW",
        "TTL",
        "TIMEOUT",
        "RETRIES",
    }
)
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#@:]*)(?::(?P<password>[^\s/?#@]*))?@"
)
_NAMED_PARAMETER = re.compile(
    r"(?P<name>(?<![A-Za-z0-9_.])[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>=|:\s+)(?P<value>[^\s&#;,'\"]+)"
)
_KEY_SHAPES = re.compile(
    "|".join(
        (
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
            r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}",
            r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}",
            r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}",
            r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}",
            r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}",
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
            r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}",
            r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}",
            r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{30,}",
            r"(?<![A-Za-z0-9])pypi-[A-Za-z0-9_-]{40,}",
            r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            r"(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*",
        )
    )
)


def mask(secret: str) -> str:
    """`***` plus a short hash: never the secret, yet two secrets still differ."""
    if _MASKED.fullmatch(secret):
        return secret
    return MASK + hashlib.sha256(secret.encode()).hexdigest()[:6]


def _segments(name: str) -> list[str]:
    return [segment for segment in re.split(r"[^A-Za-z0-9]+", name.upper()) if segment]


def is_secret_name(name: str) -> bool:
    """Does a variable or parameter NAME say that its value is a secret?"""
    if name.upper() in _NOT_SECRET_NAMES:
        return False
    return any(segment in _SECRET_SEGMENTS or segment.endswith(_SECRET_SUFFIXES) for segment in _segments(name))


def is_quantity(name: str, value: str) -> bool:
    """A plain number under a name that ends in a quantity word (a limit, a count, a size): never a secret."""
    segments = _segments(name)
    return bool(segments) and segments[-1] in _QUANTITY_SEGMENTS and _PLAIN_NUMBER.fullmatch(value.strip()) is not None


def _masks_by_name(name: str, value: str) -> bool:
    return is_secret_name(name) and not is_quantity(name, value)


def _is_masked(text: str) -> bool:
    return text.startswith(MASK)


def _userinfo(match: re.Match[str]) -> str:
    user, password = match.group("user"), match.group("password")
    if password is not None and password and not _is_masked(password):
        return f"{match.group('scheme')}{user}:{mask(password)}@"
    if password is None and user and not _is_masked(user):
        return f"{match.group('scheme')}{mask(user)}@"
    return match.group(0)


def _parameter(match: re.Match[str]) -> str:
    value = match.group("value")
    if not _masks_by_name(match.group("name"), value) or _is_masked(value):
        return match.group(0)
    return f"{match.group('name')}{match.group('sep')}{mask(value)}"


def scrub(text: str) -> str:
    """`text` with every secret-shaped part masked: URL userinfo, secret-named parameters, well-known keys."""
    if not text:
        return text
    text = _KEY_SHAPES.sub(lambda match: mask(match.group(0)), text)
    text = _URL_USERINFO.sub(_userinfo, text)
    return _NAMED_PARAMETER.sub(_parameter, text)


def redact(name: str, value: str) -> str:
    """A variable's value as it may be shown: masked whole when its name says secret, else scrubbed by shape."""
    return mask(value) if _masks_by_name(name, value) and not _is_masked(value) else scrub(value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {name: redact(name, value) for name, value in env.items()}


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The values of `env` that are secrets (by name, or the secret parts of a value by shape), plus `extra`:
    what a log copier must never let through, whatever line it turns up in. Longest first, so that a secret
    containing another is masked whole."""
    found = {value for name, value in env.items() if _masks_by_name(name, value) and value}
    for value in env.values():
        found |= _secret_parts(value)
    found |= {value for value in extra if value}
    return sorted((value for value in found if len(value) >= 4), key=len, reverse=True)


def _secret_parts(value: str) -> set[str]:
    parts = {match.group(0) for match in _KEY_SHAPES.finditer(value)}
    for match in _URL_USERINFO.finditer(value):
        parts.add(match.group("password") or match.group("user") or "")
    for match in _NAMED_PARAMETER.finditer(value):
        if _masks_by_name(match.group("name"), match.group("value")):
            parts.add(match.group("value"))
    return {part for part in parts if part and not _is_masked(part)}


def mask_known(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a known secret value masked (then scrubbed by shape)."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, mask(secret))
    return scrub(text)
