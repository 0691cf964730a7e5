"""Third-party-shaped purples for the `agent = "a2a"` tests: each an A2A server that imports nothing of mcu_arms, as
someone else's repository would hold it. The a2a-sdk 1.x one is the example of docs/how-to/own-agent.md, read from
the page; the 0.3 one runs in a venv of its own (built once under ~/.cache/mcu-arms/test-venvs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

PAGE = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "own-agent.md"
LEGACY_VERSION = "0.3.26"
VENVS = Path.home() / ".cache" / "mcu-arms" / "test-venvs"
INSTALL_DEADLINE_S = 300


def page_block(title: str) -> str:
    """The code block of the how-to page titled `title` (```lang title="..."), as a reader would copy it."""
    found = re.search(r'```\w+ title="' + re.escape(title) + r'"\n(.*?)\n```', PAGE.read_text(), re.DOTALL)
    assert found, f"{PAGE} has no block titled {title}"
    return found.group(1) + "\n"


# Forks a grandchild that outlives nothing of ours unless it is stopped with the purple's group: a helper process a
# real agent might start (a model server, a browser). It writes its pid where the test finds it.
FORKING_PREFIX = """import os, subprocess, sys
_helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
open(os.environ.get("GRANDCHILD_PID_FILE", "grandchild.pid"), "w").write(str(_helper.pid))
"""

# An a2a-sdk 0.3 purple, started with placeholders: `python legacy_purple.py {host} {port}`.
LEGACY_PURPLE = """import json, sys
import uvicorn
from a2a.server.agent_execution import AgentExecutor
from a2a.server.apps import A2AStarletteApplication
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentSkill
from a2a.utils import new_agent_text_message


class LegacyPurple(AgentExecutor):
    async def execute(self, context, event_queue):
        payload = json.loads(context.get_user_input())
        if payload["type"] == "init":
            reply = {"type": "ack", "success": True, "message": "legacy ready"}
        else:
            reply = {"type": "action", "action_type": "env", "action": {"forward": 1, "camera": [0, 0]}}
        await event_queue.enqueue_event(new_agent_text_message(json.dumps(reply), context_id=context.context_id))

    async def cancel(self, context, event_queue):
        pass


host, port = sys.argv[1], int(sys.argv[2])
card = AgentCard(name="legacy purple", description="a2a-sdk 0.3 purple", url=f"http://{host}:{port}/", version="0.3.0",
                 capabilities=AgentCapabilities(streaming=False), default_input_modes=["text"],
                 default_output_modes=["text"], skills=[AgentSkill(id="p", name="p", description="p", tags=["p"])])
handler = DefaultRequestHandler(agent_executor=LegacyPurple(), task_store=InMemoryTaskStore())
app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
uvicorn.run(app, host=host, port=port, log_level="warning")
"""


def agent_repo(where: Path, script: str, name: str = "my_purple.py") -> Path:
    """A git repository holding one agent script, committed: its commit is the agent's code identity."""
    where.mkdir(parents=True, exist_ok=True)
    (where / name).write_text(script)
    for step in (
        ["git", "init", "-q"],
        ["git", "add", name],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "agent"],
    ):
        subprocess.run(step, cwd=where, check=True, capture_output=True)
    return where


def legacy_python() -> Path:
    """A venv with a2a-sdk 0.3, built once per machine; skip (saying why) when the registry cannot be reached."""
    venv = VENVS / f"a2a-sdk-{LEGACY_VERSION}"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import a2a.server.apps, uvicorn"]
    VENVS.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv) + ".lock"):
        if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
            return python
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "-q", f"a2a-sdk[http-server]=={LEGACY_VERSION}", "uvicorn"],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_DEADLINE_S)
            except subprocess.TimeoutExpired:
                pytest.skip(f"building the a2a-sdk {LEGACY_VERSION} venv took over {INSTALL_DEADLINE_S} s")
            if done.returncode != 0:
                pytest.skip(f"cannot build an a2a-sdk {LEGACY_VERSION} venv (offline?): {done.stderr.strip()[-300:]}")
    return python
