"""What a newcomer meets: `run --tag KEY=VALUE --note TEXT` kept in every episode's report (never in the
fingerprint), shown by `status`, bad tags refused at the flag, secrets in them masked; model endpoints that do not
answer named by `plan` and `doctor` before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import invoke
from run_helpers import report, run_cli, write_arm

from mcu_arms.contracts.annotations import checked_note, matches_tags, parse_tags
from mcu_arms.contracts.errors import UserError


def test_tags_are_parsed_bounded_and_scrubbed_and_bad_ones_name_the_flag():
    assert parse_tags(["purpose=ablation", "who=ana", "empty="]) == {"purpose": "ablation", "who": "ana", "empty": ""}
    assert parse_tags(["api_key=hunter2-secret"])["api_key"].startswith("***")
    assert "\\x1b" in parse_tags(["why=\x1b[2J"])["why"]
    for bad in ("no-equals", "=value", "sp ace=x", f"k={'x' * 201}"):
        with pytest.raises(UserError) as raised:
            parse_tags([bad])
        assert raised.value.key == "--tag" and "KEY=VALUE" in (raised.value.allowed or raised.value.message), bad
    with pytest.raises(UserError, match="given twice"):
        parse_tags(["a=1", "a=2"])
    with pytest.raises(UserError, match="33 tags"):
        parse_tags([f"k{index}=v" for index in range(33)])
    assert checked_note("  ") is None and checked_note("baseline for the ablation") == "baseline for the ablation"
    with pytest.raises(UserError) as raised:
        checked_note("x" * 2001)
    assert raised.value.key == "--note"
    assert matches_tags({"purpose": "ablation", "who": "ana"}, {"purpose": "ablation"})
    assert not matches_tags({"purpose": "pilot"}, {"purpose": "ablation"})


def test_a_bad_tag_is_refused_before_anything_runs(tmp_path: Path) -> None:
    write_arm(tmp_path, "a", agent="noop", steps=5)
    refused = invoke(tmp_path, {"MCU_ARMS_STATE_DIR": str(tmp_path / "state")}, "run", "--arm", "a", "--tag", "oops")
    assert refused.exit_code == 2 and "--tag" in refused.err and "KEY=VALUE" in refused.err
    assert not (tmp_path / "output").exists()


@pytest.mark.slow
def test_tags_and_note_reach_the_report_and_status_but_not_the_fingerprint(tmp_path: Path) -> None:
    write_arm(tmp_path, "a", agent="noop", steps=5)
    state = tmp_path / "state"
    done = run_cli(
        tmp_path,
        state,
        "run",
        "--arm",
        "a",
        "--tag",
        "purpose=ablation",
        "--tag",
        "who=ana",
        "--note",
        "first try of the noop baseline",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = report(tmp_path, "a")
    assert data is not None and data["status"] == "finished"
    assert data["tags"] == {"purpose": "ablation", "who": "ana"} and data["note"] == "first try of the noop baseline"
    plain = run_cli(tmp_path, state, "plan", "--dry-run", "--json", "--arm", "a")
    assert json.loads(plain.stdout)["plans"][0]["fingerprint"] == data["fingerprint"], "tags never change it"

    shown = run_cli(tmp_path, state, "status", "--json")
    (arm,) = json.loads(shown.stdout)["arms"]
    assert arm["tags"] == {"purpose": "ablation", "who": "ana"} and arm["note"] == "first try of the noop baseline"
    table = run_cli(tmp_path, state, "status")
    assert "purpose=ablation who=ana; first try of the noop baseline" in table.stdout

    compared = run_cli(tmp_path, state, "compare", "a", "--tag", "who=ana", "--tag", "purpose=ablation", "--json")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    (used,) = json.loads(compared.stdout)["arms"][0]["used"]
    assert used["tags"] == {"purpose": "ablation", "who": "ana"} and used["note"] == "first try of the noop baseline"
    other = run_cli(tmp_path, state, "compare", "a", "--tag", "purpose=smoke")
    assert other.returncode == 1, "no episode with that tag: no result"
    assert "a episode 1 (seed 0, finished): other tags: run with tags purpose=ablation who=ana" in other.stdout


def test_plan_and_doctor_say_which_model_endpoints_do_not_answer(tmp_path: Path) -> None:
    """A planned arm's planner and policy are asked before anything starts: any HTTP answer (a 404 too) is a server
    that is there; a closed port is named, as a warning of the plan (the service may come up before the run)."""
    import http.server
    import threading

    from server_procs import free_port

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        closed = free_port()
        arms = tmp_path / "arms"
        arms.mkdir()
        (arms / "p.toml").write_text(
            'agent = "planned"\ntask = "mine_diamond_from_scratch"\nsimulator = "embedded"\nobserve = "state"\n'
            f'[planner]\nbase_url = "http://127.0.0.1:{server.server_port}/v1"\nmodel = "m"\n'
            f'[policy]\nbackend = "chat"\nbase_url = "http://127.0.0.1:{closed}/v1"\nmodel = "m"\n'
        )
        env = {"MCU_ARMS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
        checked = invoke(tmp_path, env, "doctor", "--json")
        rows = {row["name"]: row for row in json.loads(checked.out)["checks"]}
        assert rows["planner endpoint"]["status"] == "ok", rows
        assert (
            rows["policy endpoint"]["status"] == "warn"
            and f"127.0.0.1:{closed}/v1/models" in rows["policy endpoint"]["detail"]
        )
        planned = json.loads(invoke(tmp_path, env, "plan", "--dry-run", "--json", "--arm", "p").out)["plans"][0]
        assert [w for w in planned["warnings"] if w.startswith("policy endpoint:")], planned["warnings"]
        assert not [w for w in planned["warnings"] if w.startswith("planner endpoint:")], "the planner answers"
        shown = invoke(tmp_path, env, "plan", "--dry-run", "--arm", "p").out
        assert f"warning: p: policy endpoint: http://127.0.0.1:{closed}/v1/models does not answer" in shown
    finally:
        server.shutdown()
        server.server_close()


def test_test_servers_are_stopped_when_ctrl_c_interrupts_their_start(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C while a test server is still starting (the longest wait of a fixture) stops it, by its own handle,
    instead of leaving it running after pytest has gone."""
    import subprocess
    import threading

    import minecraft_server
    import psutil
    import server_procs

    def interrupted(_url: str) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(server_procs, "card_ready", interrupted)
    port = server_procs.free_port()
    started: list[server_procs.ServerProcess] = []
    real_init = server_procs.ServerProcess.__init__

    def recording_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(server_procs.ServerProcess, "__init__", recording_init)
    with pytest.raises(KeyboardInterrupt):
        with server_procs.running_cli_server(
            ["serve", "purple", "--agent", "noop", "--port", str(port)], tmp_path / "purple.log", port
        ):
            pass
    assert started and started[0].process.poll() is not None, "the purple was stopped"

    class CtrlC:
        def wait(self, _timeout: float) -> bool:
            raise KeyboardInterrupt

    server = minecraft_server.MinecraftServer.__new__(minecraft_server.MinecraftServer)
    server.process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    server.create_time = psutil.Process(server.process.pid).create_time()
    server._reader = threading.Thread(target=lambda: None)
    server._reader.start()
    server._log = (tmp_path / "server.log").open("w")
    server.ready, server._ready = {}, CtrlC()
    with pytest.raises(KeyboardInterrupt):
        with server:
            pass
    assert server.process.poll() is not None, "the Minecraft test server was stopped"


def test_inputs_without_effect_have_one_name_apart_from_noops_and_other_fallbacks():
    """The live view and compare call them the same ("inputs without effect"), never noops, never mixed with the
    simulator's other fallbacks (deaths, respawns)."""
    from mcu_arms.report.compare import _no_effect
    from mcu_arms.supervise.live import progress_line
    from mcu_arms.supervise.progress import ArmProgress

    fallbacks = {"deaths": 1, "no_effect.camera": 40, "no_effect.drop": 2}
    assert _no_effect(fallbacks, True) == {"camera": 40, "drop": 2}
    assert _no_effect(fallbacks, False) == {"deaths": 1}
    progress = ArmProgress("demo", 100)
    progress.no_effect_steps = 42
    assert "noops 0; inputs without effect 42," in progress_line(progress)
