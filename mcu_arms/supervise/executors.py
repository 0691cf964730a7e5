"""Where a run's episodes go: here, side by side (runner.supervise_here), or as Slurm jobs (slurm.supervise_jobs).

Both share what comes before: the reports of earlier runs reconciled with Slurm, rerun decisions, the arms held by
this invocation, no run beside a live process of the same arm, and Ctrl-C/SIGTERM caught on the main thread.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from rich.console import Console
from rich.markup import escape

from mcu_arms.arms.campaign import Selection
from mcu_arms.atomic import write_json_exclusive
from mcu_arms.contracts.campaign_run import CampaignCell, CampaignRun
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.settings import ArmPlan
from mcu_arms.contracts.timestamps import iso_seconds
from mcu_arms.environment import Environment
from mcu_arms.isolation.host import host_parallelism
from mcu_arms.layout import campaign_runs_dir, episode_name
from mcu_arms.process.private_record import recorded_episodes, started_processes
from mcu_arms.process.procs import live_processes
from mcu_arms.supervise.outcomes import ArmOutcome, RunOutcome
from mcu_arms.supervise.reruns import rerun_decision
from mcu_arms.supervise.runner import RunOptions, supervise_here


def run_options(
    plans: list[ArmPlan],
    selection: Selection,
    *,
    max_parallel: int | None,
    retries: int | None,
    **given: Any,
) -> RunOptions:
    """How `run` runs `plans`: episodes at once from --max-parallel, else the campaign's max_parallel, else what this
    host can take (on Slurm: as many as are submitted, the arrays throttled by their own settings); --retries, else
    the campaign's; the rest (`given`) as the flags say."""
    on_slurm = any(plan.executor == "slurm" for plan in plans)
    return RunOptions(
        max_parallel=max_parallel
        or selection.max_parallel
        or (RunOptions().max_parallel if on_slurm else host_parallelism(plans)),
        retries=selection.retries if retries is None else retries,
        **given,
    )


def run_arms(
    plans: list[ArmPlan], env: Environment, options: RunOptions, out: Console, *, detach: bool = False
) -> RunOutcome:
    """Run every arm that is not skipped, side by side, here or as Slurm jobs (the plans' executor); returns once
    each is finished, failed or interrupted (with `detach`, once the Slurm jobs are submitted)."""
    from mcu_arms.supervise.jobs import reconcile, refuse_live_jobs

    for line in reconcile(env, list(dict.fromkeys(plan.arm for plan in plans))):
        out.print(f"[yellow]{escape(line)}[/]", highlight=False)
    refuse_live_jobs(plans, env)
    outcomes: list[ArmOutcome] = []
    to_run: list[ArmPlan] = []
    for plan in plans:
        decision = rerun_decision(plan, env.output_dir / plan.arm, rerun=options.rerun)
        if decision.message:
            out.print(f"[{'dim' if decision.skip else 'yellow'}]{decision.message}[/]", highlight=False)
        if decision.skip:
            outcomes.append(
                ArmOutcome(arm=plan.arm, seed=plan.settings.seed, status="skipped", message=decision.message or "")
            )
        else:
            to_run.append(plan)
    if not to_run:
        return RunOutcome(arms=outcomes)

    from mcu_arms.arms.prepare import held_arms, held_ports

    signalled: list[str] = []
    wake = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signal.Signals(signum).name)
        wake.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with held_arms(to_run, env):
            refuse_live_processes(to_run, env)
            if any(plan.executor == "slurm" for plan in to_run):
                from mcu_arms.supervise.slurm import supervise_jobs

                record_campaign_runs(plans, to_run, env, options)
                outcomes += supervise_jobs(to_run, env, options, out, signalled, wake, detach=detach)
            else:
                with held_ports(to_run, env):
                    record_campaign_runs(plans, to_run, env, options)  # once nothing can refuse the run any more
                    outcomes += supervise_here(to_run, env, options, out, signalled, wake)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    order: dict[tuple[str, int | None], int] = {
        (plan.arm, plan.settings.seed): index for index, plan in enumerate(plans)
    }
    outcomes.sort(key=lambda outcome: (order.get((outcome.arm, outcome.seed), 0), outcome.attempt))
    return RunOutcome(arms=outcomes, interrupted_by=signalled[0] if signalled else None)


def record_campaign_runs(plans: list[ArmPlan], to_run: list[ArmPlan], env: Environment, options: RunOptions) -> None:
    """Before the first episode starts, once the run can no longer be refused (arms and ports held, no live
    process beside them): each campaign's record of the episodes this run sets out to run (the ones
    not yet started are what `status --campaign` shows as queued)."""
    import psutil

    me = psutil.Process()
    running = {id(plan) for plan in to_run}
    for tag in {plan.campaign.run: plan.campaign for plan in plans if plan.campaign is not None}.values():
        cells = [
            CampaignCell(arm=plan.arm, seed=plan.settings.seed, skipped=id(plan) not in running)
            for plan in plans
            if plan.campaign == tag
        ]
        record = CampaignRun(
            name=tag.name,
            run=tag.run,
            started_at=iso_seconds(env.clock()),
            supervisor_pid=me.pid,
            supervisor_create_time=me.create_time(),
            max_parallel=options.max_parallel,
            cells=cells,
        )
        directory = campaign_runs_dir(env.output_dir, tag.name)
        directory.mkdir(parents=True, exist_ok=True)
        write_json_exclusive(directory / f"{tag.run}.json", record)


def refuse_live_processes(plans: list[ArmPlan], env: Environment) -> None:
    """No run beside a live process of the same arm, whichever episode started it (a SIGKILLed run leaves its green
    and purple running: a new episode beside them would share the arm's ports, home and host unseen). What counts
    is what the private record names, not what reports say."""
    for plan in plans:
        live = live_processes(started_processes(recorded_episodes(env.variables, env.output_dir / plan.arm)))
        if live:
            shown = ", ".join(f"{episode_name(p.episode)} {p.role} pid {p.pid}" for p in live[:6])
            more = f" and {len(live) - 6} more" if len(live) > 6 else ""
            raise UserError(
                f"arm '{plan.arm}' has live processes: {shown}{more}; see `mcu-arms status --arm {plan.arm}`, "
                f"stop them with `mcu-arms stop --arm {plan.arm}`",
                path=plan.source,
            )
