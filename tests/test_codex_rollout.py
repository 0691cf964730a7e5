"""Reading a codex rollout: the requests a turn sent, rebuilt from the history codex re-sends with each one.

The records here have the shape codex-cli 0.171 writes (response_item, token_usage_record, task_started, compacted);
tests/test_real_codex.py holds the same reader to what a server actually received from the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

from mcu_arms.purple.codex_runner import (
    COMPACTION_PROMPT_BYTES,
    REQUEST_ENVELOPE_BYTES,
    UNRECORDED_INSTRUCTIONS_BYTES,
    UNRECORDED_TOOLS_BYTES,
    read_rollout,
)

TOOLS = {"type": "additional_tools", "role": "developer", "tools": [{"name": "exec", "description": "x" * 500}]}
INSTRUCTIONS = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "y" * 800}]}
PASSTHROUGH = {"internal_chat_message_metadata_passthrough": {"kept": "by codex, never sent"}}


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}], **PASSTHROUGH}


CALL = {"type": "function_call", "name": "exec_command", "call_id": "c1", "arguments": '{"cmd":"true"}'}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
REPLY = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
SUMMARY = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "summary"}]}


def sent(item: dict) -> int:
    item = {key: value for key, value in item.items() if key not in PASSTHROUGH}
    return len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())


def write(path: Path, records: list[tuple[str, dict]]) -> int:
    """Append records; returns the file's size before them (a turn's starting offset)."""
    before = path.stat().st_size if path.exists() else 0
    with open(path, "a", encoding="utf-8") as rollout:
        for kind, payload in records:
            rollout.write(json.dumps({"timestamp": "t", "type": kind, "payload": payload}) + "\n")
    return before


def usage(total: int) -> tuple[str, dict]:
    return "token_usage_record", {"usage": {"input_tokens": total - 10, "output_tokens": 10, "total_tokens": total}}


def test_each_request_carries_the_history_so_far_and_a_turn_owns_the_requests_after_its_offset(tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    prompt_1, prompt_2 = user("a" * 3000), user("b" * 200)
    write(
        rollout,
        [
            ("session_meta", {"id": "t"}),
            ("event_msg", {"type": "task_started", "model_context_window": 95_000}),
            ("response_item", TOOLS),
            ("response_item", INSTRUCTIONS),
            ("response_item", prompt_1),
            ("response_item", CALL),
            usage(500),
            ("response_item", OUTPUT),
            ("response_item", REPLY),
            usage(900),
        ],
    )
    start = write(
        rollout,
        [
            ("event_msg", {"type": "task_started", "model_context_window": 95_000}),
            ("response_item", prompt_2),
            ("response_item", REPLY),
            usage(1_400),
        ],
    )
    base = REQUEST_ENVELOPE_BYTES + sent(TOOLS) + sent(INSTRUCTIONS)
    first_turn = [base + sent(prompt_1), base + sent(prompt_1) + sent(CALL) + sent(OUTPUT)]
    whole = read_rollout(rollout)
    assert [r.body_bytes for r in whole.requests] == first_turn + [first_turn[1] + sent(REPLY) + sent(prompt_2)]
    assert [r.body_bytes for r in read_rollout(rollout, since=start).requests] == [whole.requests[2].body_bytes]
    assert whole.last_total_tokens == 1_400 and whole.codex_window == 100_000 and whole.compactions == 0


def test_a_compaction_sends_the_history_and_its_prompt_then_the_replacement_is_the_history(tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    prompt_1, prompt_2 = user("a" * 1000), user("b" * 100)
    write(rollout, [("response_item", TOOLS), ("response_item", prompt_1), ("response_item", REPLY), usage(60_000)])
    start = write(
        rollout,
        [
            ("response_item", SUMMARY),
            usage(100),
            ("compacted", {"message": "summary", "replacement_history": [TOOLS, user("summary")]}),
            ("response_item", prompt_2),
            ("response_item", REPLY),
            usage(2_000),
        ],
    )
    turn = read_rollout(rollout, since=start)
    before = REQUEST_ENVELOPE_BYTES + sent(TOOLS) + sent(prompt_1) + sent(REPLY)
    after = REQUEST_ENVELOPE_BYTES + sent(TOOLS) + sent(user("summary")) + sent(prompt_2)
    assert [(r.kind, r.body_bytes) for r in turn.requests] == [
        ("compaction", before + COMPACTION_PROMPT_BYTES),
        ("turn", after),
    ]
    assert turn.compactions == 1 and turn.last_total_tokens == 2_000


def test_a_model_codex_does_not_know_sends_tools_and_instructions_the_rollout_lacks(tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    prompt = user("c" * 500)
    write(rollout, [("response_item", INSTRUCTIONS), ("response_item", prompt), ("response_item", REPLY), usage(10)])
    (request,) = read_rollout(rollout).requests
    expected = REQUEST_ENVELOPE_BYTES + UNRECORDED_TOOLS_BYTES + UNRECORDED_INSTRUCTIONS_BYTES
    assert request.body_bytes == expected + sent(INSTRUCTIONS) + sent(prompt)


def test_a_request_left_unanswered_is_counted_and_a_torn_line_is_skipped(tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    write(rollout, [("response_item", TOOLS), ("response_item", user("d"))])
    with open(rollout, "a") as torn:
        torn.write('{"type": "response_item", "payload": {"type": "mess')  # codex killed mid-write
    (request,) = read_rollout(rollout).requests
    assert request.body_bytes == REQUEST_ENVELOPE_BYTES + sent(TOOLS) + sent(user("d"))
    assert read_rollout(None).requests == [] and read_rollout(tmp_path / "missing.jsonl").requests == []
