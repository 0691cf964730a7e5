"""The on-disk layout: every path of the episode tree, the `logs/` links and the host's state dir, built here only.

What holds the agent's conversation is private, as private as its CODEX_HOME: `purple/` (turn prompts, events,
memory) is 0700, `logs/purple.log` 0600. Results, reports, plans and the other logs are for sharing (0644).

    output/<arm>/episode_NNN/         one run; a new run never reuses an existing dir
        plan.json  scenario.toml      what was planned
        result.json                   the run report (contracts/run_report.py)
        slurm.json                    the Slurm job it was submitted as, when it ran on Slurm
        job-token.sha256              the hash its job's token must match (the token is in the job's environment)
        events.jsonl                  the green's typed progress events, as the client received them
        logs/{green,purple,client,mcu-arms}.log
        green/evaluation.json         the green's result (contracts/evaluation.py)
        green/<task>/steps.jsonl      one record per step (contracts/steps.py), frames/ beside it
        purple/                       the agent's own files and report; its episodes in task_NN/
    output/.slurm-jobs/               the Slurm job scripts mcu-arms wrote, and their own output (setup lines)
    logs/<arm>_{green,purple,client}.log, logs/<arm>_result.json   links to the latest episode's files
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mcu_arms.atomic import PRIVATE_DIR_MODE, write_json_atomic
from mcu_arms.contracts.agent_report import TURN_FRAMES_DIR, TURNS_DIR, turn_dir_name, turn_frame_name
from mcu_arms.contracts.errors import UserError
from mcu_arms.contracts.limits import MAX_EVALUATION_BYTES, MAX_RECORD_BYTES
from mcu_arms.contracts.reading import inside, open_untrusted, read_json, size_text
from mcu_arms.contracts.run_report import RunReport, read_report
from mcu_arms.contracts.states import PROCESS_ROLES, SUPERVISOR_ROLE
from mcu_arms.contracts.steps import FRAMES_DIR, STEPS_FILE, frame_name

EPISODE_PATTERN = re.compile(r"^episode_(\d{3,})$")
PURPLE_TASK_PATTERN = re.compile(r"^task_(\d{2,})$")
RESULT_FILE = "result.json"
PLAN_FILE = "plan.json"
SCENARIO_FILE = "scenario.toml"
EVENTS_FILE = "events.jsonl"
EVALUATION_FILE = "evaluation.json"
STOP_REQUEST = "stop.request"
SLURM_JOB_FILE = "slurm.json"
JOB_TOKEN_FILE = "job-token.sha256"
# A user's stop request names this command (and its pid); one the run leaves for its own episodes (Ctrl-C on a
# Slurm watch) names the run. A request that names nobody is counted as the user's.
STOP_COMMAND = "mcu-arms stop"
UNNAMED_STOPPER = STOP_COMMAND
# Under the output root: the job scripts and logs of the Slurm jobs episodes ran as (not an arm: no arm name starts
# with a dot).
SLURM_JOBS_DIR = ".slurm-jobs"
SPACE_RESERVE = ".space-reserve"
# Disk the supervisor holds back while an arm runs, so that a disk filled by the run still takes its final report.
SPACE_RESERVE_BYTES = 1024 * 1024
GREEN_DIR = "green"
PURPLE_DIR = "purple"
LOGS_DIR = "logs"
STATE_DIR_ENV = "MCU_ARMS_STATE_DIR"
ARM_LOCKS_DIR = "arms"


TASK_DIR_GLOB = "task_*"  # a purple's per-episode directories, task_01, task_02, ... under its output dir


def claim_task_dir(purple_dir: Path) -> Path:
    """A purple's next free task_NN directory; mkdir without exist_ok makes concurrent episodes take different ones."""
    purple_dir.mkdir(parents=True, exist_ok=True)
    number = 1 + sum(1 for path in purple_dir.glob(TASK_DIR_GLOB) if path.is_dir())
    while True:
        candidate = purple_dir / f"task_{number:02d}"
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            number += 1


def episode_name(number: int) -> str:
    return f"episode_{number:03d}"


def state_dir(env: Mapping[str, str]) -> Path:
    """Host-wide state (the port registry, locks): local disk, not $HOME, which may be a network filesystem."""
    if env.get(STATE_DIR_ENV):
        return Path(env[STATE_DIR_ENV])
    user = env.get("USER") or getpass.getuser()
    return Path("/var/tmp") / f"mcu-arms-{user}"


def lost_reports_dir(env: Mapping[str, str]) -> Path:
    """Where a run report goes when its episode directory can no longer be written (disk full, output/ deleted)."""
    return state_dir(env) / "lost-reports"


def prepared_state_dir(path: Path) -> Path:
    """The state dir, created if missing; a UserError naming it when it cannot be (a file there, no permission)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"cannot create the state directory: {error.strerror or error}", path=path, key=STATE_DIR_ENV
        ) from None
    if not path.is_dir():
        raise UserError("the state directory is not a directory", path=path, key=STATE_DIR_ENV)
    return path


def arm_lock(env: Mapping[str, str], arm_dir: Path) -> Path:
    """The lock one `mcu-arms run` (or `plan`) holds on an arm while it prepares and runs it. Named by the arm and
    its output directory, so that two checkouts with an arm of the same name do not block each other."""
    digest = hashlib.sha256(os.path.realpath(arm_dir).encode()).hexdigest()[:12]
    return state_dir(env) / ARM_LOCKS_DIR / f"{arm_dir.name}-{digest}.lock"


@dataclass(frozen=True)
class RunDir:
    """One episode directory of an arm and the files in it."""

    path: Path

    @property
    def number(self) -> int:
        match = EPISODE_PATTERN.match(self.path.name)
        if match is None:
            raise ValueError(f"{self.path} is not an episode directory")
        return int(match.group(1))

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def report(self) -> Path:
        return self.path / RESULT_FILE

    @property
    def plan(self) -> Path:
        return self.path / PLAN_FILE

    @property
    def scenario(self) -> Path:
        return self.path / SCENARIO_FILE

    @property
    def events(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def stop_request(self) -> Path:
        return self.path / STOP_REQUEST

    @property
    def slurm_job(self) -> Path:
        """The Slurm job the episode was submitted as (contracts/slurm.SlurmJob), written by the submitting host."""
        return self.path / SLURM_JOB_FILE

    @property
    def job_token(self) -> Path:
        """The hash of the token the episode's job was given, bound to this directory (contracts/started.py)."""
        return self.path / JOB_TOKEN_FILE

    @property
    def space_reserve(self) -> Path:
        return self.path / SPACE_RESERVE

    @property
    def logs(self) -> Path:
        return self.path / LOGS_DIR

    def log(self, role: str) -> Path:
        return self.logs / f"{role}.log"

    @property
    def green(self) -> Path:
        return self.path / GREEN_DIR

    @property
    def purple(self) -> Path:
        return self.path / PURPLE_DIR

    @property
    def evaluation(self) -> Path:
        return self.green / EVALUATION_FILE

    def relative(self, path: Path | str) -> str:
        """A path inside the episode as stored in its report: relative, so a moved `output/` still resolves."""
        try:
            return str(Path(path).relative_to(self.path))
        except ValueError:
            return str(path)

    def resolve(self, stored: str, key: str | None = None) -> Path:
        """A path read from the report, wherever the episode directory now is; a UserError when it would lead out of
        the episode (absolute, `..`, a link out): output/ is untrusted input."""
        return inside(self.path, stored, what="run report", key=key, source=self.report)

    def write_report(self, report: RunReport) -> None:
        """Atomic: a reader never sees half a report."""
        write_json_atomic(self.report, report)

    def request_stop(self, who: str) -> None:
        """Ask whatever runs this episode to stop, saying who asked (its supervisor polls for the file)."""
        write_json_atomic(self.stop_request, {"requested_by": who})

    def stopped_by_user(self) -> bool:
        """Whether a user's `mcu-arms stop` asked this episode to stop (not the run's own Ctrl-C or signal)."""
        who = self.stop_requested_by()
        return who is not None and who.startswith(STOP_COMMAND)

    def stop_requested_by(self) -> str | None:
        """Who asked this episode to stop (None: nobody); a request that cannot be read still counts."""
        if not os.path.lexists(self.stop_request):
            return None
        try:
            who = read_json(self.stop_request, MAX_RECORD_BYTES, "stop request").get("requested_by", UNNAMED_STOPPER)
        except (UserError, AttributeError):
            return UNNAMED_STOPPER
        return who if isinstance(who, str) else UNNAMED_STOPPER


def task_dir(green_dir: Path, task: str) -> Path:
    return green_dir / task


def logged_tasks(green_dir: Path) -> list[str]:
    """The tasks of an episode that have a step log, in name order (a run cut short may lack its evaluation)."""
    if not green_dir.is_dir():
        return []
    return sorted(p.name for p in green_dir.iterdir() if p.is_dir() and (p / STEPS_FILE).is_file())


def steps_log(green_dir: Path, task: str) -> Path:
    return task_dir(green_dir, task) / STEPS_FILE


def frames_dir(green_dir: Path, task: str) -> Path:
    return task_dir(green_dir, task) / FRAMES_DIR


def frame_file(green_dir: Path, task: str, step: int) -> Path:
    return frames_dir(green_dir, task) / frame_name(step)


def purple_task_dirs(purple_dir: Path) -> list[Path]:
    """A codex agent's episode dirs (purple/task_NN), in the order the episodes started."""
    if not purple_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in purple_dir.iterdir() if (m := PURPLE_TASK_PATTERN.match(p.name))]
    return [path for _, path in sorted(found) if path.is_dir()]


def turn_dir(purple_task_dir: Path, turn: int) -> Path:
    return purple_task_dir / TURNS_DIR / turn_dir_name(turn)


def turn_frame(purple_task_dir: Path, step: int) -> Path:
    return purple_task_dir / TURN_FRAMES_DIR / turn_frame_name(step)


@dataclass(frozen=True)
class RunOnDisk:
    """An episode directory and its report, when it has a readable one."""

    run_dir: RunDir
    report: RunReport | None
    report_error: str | None = None  # a result.json that exists but cannot be read

    @property
    def number(self) -> int:
        return self.run_dir.number


def run_dirs(arm_dir: Path) -> list[RunDir]:
    """An arm's episode dirs (output/<arm>/episode_NNN), newest first, without reading anything in them."""
    if not arm_dir.is_dir():
        return []
    found = [RunDir(path) for path in arm_dir.iterdir() if EPISODE_PATTERN.match(path.name) and path.is_dir()]
    return sorted(found, key=lambda run: run.number, reverse=True)


def read_episode_report(run_dir: RunDir) -> RunReport:
    """The episode's report read as untrusted input (contracts/reading.py: every path it names relative, without
    `..`), and the one file readers follow from it, its evaluation, checked to stay inside the episode through any
    link and, when there, to be a regular file within its bound (the other paths are shown, never opened; a reader
    that opens one resolves it with RunDir.resolve). A UserError names what breaks a rule: the episode is then
    unreadable, for every reader alike."""
    report = read_report(run_dir.report)
    if report.evaluation_file is not None:
        evaluation = run_dir.resolve(report.evaluation_file, "evaluation_file")
        if os.path.lexists(evaluation):
            with open_untrusted(evaluation, "evaluation") as handle:
                size = os.fstat(handle.fileno()).st_size
            if size > MAX_EVALUATION_BYTES:
                raise UserError(
                    f"the evaluation is {size_text(size)}, over the {size_text(MAX_EVALUATION_BYTES)} read",
                    path=evaluation,
                )
    return report


def arm_runs(arm_dir: Path) -> list[RunOnDisk]:
    """An arm's episode dirs, newest first, each with its report when readable (read_episode_report)."""
    runs = []
    for run_dir in run_dirs(arm_dir):
        report, error = None, None
        if os.path.lexists(run_dir.report):
            try:
                report = read_episode_report(run_dir)
            except (OSError, UserError) as problem:
                error = problem.render() if isinstance(problem, UserError) else f"{run_dir.report}: {problem}"
        runs.append(RunOnDisk(run_dir, report, error))
    return runs


def next_episode(arm_dir: Path) -> int:
    """The next free episode number: one above any that exists, so an earlier run is never reused."""
    numbers = [0]
    if arm_dir.is_dir():
        numbers += [int(m.group(1)) for p in arm_dir.iterdir() if (m := EPISODE_PATTERN.match(p.name))]
    return max(numbers) + 1


def check_directory(path: Path, what: str, key: str | None = None) -> None:
    """A one-line UserError when `path`, or a folder above it, exists as something other than a directory (a
    regular file named `logs`, say): found before anything starts, not as an arm's failure halfway."""
    probe = path
    while True:
        if os.path.lexists(probe):
            if not probe.is_dir():
                kind = "a link to no directory" if probe.is_symlink() else "a file, not a directory"
                where = "" if probe == path else f" (on the way to {path})"
                raise UserError(f"is {kind}{where}: it must be a directory, for {what}", path=probe, key=key)
            return
        if probe.parent == probe:
            return
        probe = probe.parent


def create_run_dir(arm_dir: Path, number: int) -> RunDir:
    """Create episode `number` (or, if another process took it meanwhile, the next free one) with its logs dir and
    its private purple dir. A UserError naming the directory when it cannot be created (read-only, a file in the
    way)."""
    try:
        arm_dir.mkdir(parents=True, exist_ok=True)
        if not arm_dir.is_dir():
            raise UserError("is not a directory; an arm's episodes go in a directory of that name", path=arm_dir)
        while True:
            path = arm_dir / episode_name(number)
            try:
                path.mkdir()
                break
            except FileExistsError:
                number = next_episode(arm_dir)
        (path / LOGS_DIR).mkdir()
        (path / PURPLE_DIR).mkdir(mode=PRIVATE_DIR_MODE)
        os.chmod(path / PURPLE_DIR, PRIVATE_DIR_MODE)  # whatever the umask
    except OSError as error:
        raise UserError(
            f"cannot create the episode directory: {error.strerror or error}", path=error.filename or arm_dir
        ) from None
    return RunDir(path)


CAMPAIGN_RUNS_DIR = ".campaigns"  # hidden beside the arms: known_arms counts dirs with episodes only


def campaign_runs_dir(output_dir: Path, campaign: str) -> Path:
    """Where each `mcu-arms run` of a campaign records the episodes it set out to run."""
    return output_dir / CAMPAIGN_RUNS_DIR / campaign


def known_arms(output_dir: Path) -> list[str]:
    """Arms with at least one episode dir under `output_dir`. A folder whose name holds a control character is no
    arm's (an arm's name is letters, digits, '_' and '-'), and its name never reaches a terminal."""
    if not output_dir.is_dir():
        return []
    return sorted(p.name for p in output_dir.iterdir() if p.name.isprintable() and p.is_dir() and run_dirs(p))


def selected_arms(output_dir: Path, names: list[str]) -> list[str]:
    """The arms named (each must have run), or every arm that has."""
    known = known_arms(output_dir)
    for name in names:
        if name not in known:
            raise UserError(
                f"no runs of arm '{name}' in {output_dir}", key="--arm", allowed=", ".join(known) or "none yet"
            )
    return names or known


def log_links(logs_dir: Path, arm: str, run_dir: RunDir) -> dict[str, str]:
    """logs/<arm>_<role>.log and logs/<arm>_result.json -> this episode's files."""
    links = {str(logs_dir / f"{arm}_{role}.log"): str(run_dir.log(role)) for role in PROCESS_ROLES}
    links[str(logs_dir / f"{arm}_{RESULT_FILE}")] = str(run_dir.report)
    return links


def repoint_links(links: Mapping[str, str], warn: Callable[[str], None]) -> None:
    """Point each link at its target with a relative symlink moved over the old one atomically.

    A regular file in the way is left alone (never overwritten), with a warning.
    """
    for link, target in links.items():
        path = Path(link)
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(path) and not path.is_symlink():
            warn(f"{path} is a regular file, not a link: left as it is (not pointed at {target})")
            continue
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        if os.path.lexists(temporary):
            temporary.unlink()
        temporary.symlink_to(os.path.relpath(target, path.parent))
        os.replace(temporary, path)


def slurm_jobs_dir(output_dir: Path) -> Path:
    return output_dir / SLURM_JOBS_DIR


def supervisor_log(run_dir: RunDir) -> Path:
    return run_dir.log(SUPERVISOR_ROLE)
