"""What a researcher says about a run (`run --tag KEY=VALUE --note TEXT`): kept in each episode's plan and report,
shown by `status`, `compare` and the viewer, and usable as a filter, so that a week of runs can be found again by
why they were run. Bounded, neutralised and scrubbed of secrets like everything else a report keeps."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.redaction import redact
from mcu_arms.contracts.text import shown_text

TAG_KEY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
MAX_TAGS = 32
MAX_TAG_VALUE_CHARS = 200
MAX_NOTE_CHARS = 2000
TAG_ALLOWED = f"KEY=VALUE, KEY {TAG_KEY_PATTERN}, VALUE up to {MAX_TAG_VALUE_CHARS} characters, at most {MAX_TAGS} tags"


def parse_tags(given: Iterable[str], *, flag: str = "--tag") -> dict[str, str]:
    """`["purpose=ablation", "who=ana"]` -> `{"purpose": "ablation", "who": "ana"}`; a bad one names the flag."""
    tags: dict[str, str] = {}
    for item in given:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(TAG_KEY_PATTERN, key):
            raise UserError(f"{item!r} is not a tag", key=flag, allowed=TAG_ALLOWED)
        if len(value) > MAX_TAG_VALUE_CHARS:
            raise UserError(f"the value of tag '{key}' has {len(value)} characters", key=flag, allowed=TAG_ALLOWED)
        if key in tags and tags[key] != value:
            raise UserError(f"tag '{key}' is given twice, as {tags[key]!r} and {value!r}", key=flag)
        tags[key] = shown_text(redact(key, value), MAX_TAG_VALUE_CHARS)
    if len(tags) > MAX_TAGS:
        raise UserError(f"{len(tags)} tags", key=flag, allowed=TAG_ALLOWED)
    return tags


def checked_note(note: str | None, *, flag: str = "--note") -> str | None:
    """The note as kept: secrets scrubbed, control characters made visible; too long a note is refused, not cut."""
    if note is None or not note.strip():
        return None
    if len(note) > MAX_NOTE_CHARS:
        raise UserError(f"the note has {len(note)} characters", key=flag, allowed=f"up to {MAX_NOTE_CHARS} characters")
    return shown_text(redact("note", note), MAX_NOTE_CHARS, one_line=False)


def matches_tags(tags: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """Whether a run's tags hold every KEY=VALUE asked for (`compare --tag`, `view --tag`)."""
    return all(tags.get(key) == value for key, value in wanted.items())
