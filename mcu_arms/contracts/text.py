"""Text that came from an agent, made safe to show: control characters neutralised, length bounded.

An agent under test chooses its key names, reasons and messages. Printed raw, an ESC or OSC sequence in them
retitles the user's terminal or clears the screen, a bidi override reorders what is read, and one 22 MB reason
makes every log line, report and table that repeats it unusable. Every place that keeps or shows such text passes
it through `shown_text` first; control characters become visible escapes (`\\x1b`), so nothing is lost to the reader.
"""

from __future__ import annotations

# Longest agent-derived text kept in one reason, message or log line.
MAX_REASON_CHARS = 300
MAX_MESSAGE_CHARS = 2000
MAX_LOG_LINE_CHARS = 8000
_KEPT_IN_LINES = frozenset("\n\t")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def neutralised(text: str, *, one_line: bool = True) -> str:
    """`text` with every character that is not printable (C0 and C1 controls, DEL, bidi overrides, zero-width and
    line-separator characters) as a visible escape; `one_line=False` keeps newlines and tabs."""
    if text.isprintable():
        return text
    kept = frozenset() if one_line else _KEPT_IN_LINES
    return "".join(char if char.isprintable() or char in kept else _escape(char) for char in text)


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more chars]"


def shown_text(text: str, limit: int = MAX_REASON_CHARS, *, one_line: bool = True) -> str:
    """Agent-derived text as it may be kept and shown: bounded first (so a huge text costs no more), then
    neutralised."""
    return neutralised(bounded(text, limit), one_line=one_line)
