"""Every size limit on what a file, a flag or an agent may hand mcu-arms, stated once; each is enforced where the
value is read, with an error that names the limit. A limit keeps one careless or hostile input from exhausting the
host (memory, time, disk) long before it would mean anything: none of them bounds a real experiment.
"""

from __future__ import annotations

# The most bytes read from one HTTP message: a request a server receives, an answer a client receives (one event of a
# stream). An observation frame is well under 1 MB; a 100 MB answer read whole cost the green 876 MB.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The variable that sets another cap on answers, for every process it reaches (a positive number of bytes).
MAX_RESPONSE_BYTES_ENV = "MCU_ARMS_MAX_RESPONSE_BYTES"

# Seeds (replicates) of one arm, and episodes one `run` or campaign plans in all.
MAX_SEEDS_PER_ARM = 10_000
MAX_EPISODES_PER_RUN = 100_000
# Variants one campaign expands to.
MAX_VARIANTS = 1_000
# A campaign's extra attempts per episode failed for infrastructure reasons (each a whole episode again), and the
# episodes it runs at once (no host runs a thousand simulators).
MAX_RETRIES = 10
MAX_PARALLEL = 1_000
# A seed is a signed 64-bit integer everywhere it goes (numpy, Java, the simulators).
SEED_LIMIT = 2**63
# Steps of one task's episode: a full MCU episode is 12,000; a million is 83 days at 0.14 s a step.
MAX_STEPS = 1_000_000
# Seconds the green waits for one action: below the minimum no agent can answer over HTTP; above the maximum a hung
# agent holds an arm for a day a step.
MIN_STEP_TIMEOUT_S = 0.1
MAX_STEP_TIMEOUT_S = 86_400.0
# The [env] table handed to a purple: its variables, and the bytes of one name or value (Linux refuses a single
# argument or variable past 128 KiB, and the whole environment past a few MB).
MAX_ENV_KEYS = 1_000
MAX_ENV_ENTRY_BYTES = 32 * 1024

# Reading output/: everything under it is untrusted input (docs/concepts/reading-output.md). A file past its bound,
# or a line past MAX_LINE_BYTES, makes its episode unreadable (named, excluded); it is never read whole.
# A run report is a few KB (its alerts and notes bounded); an evaluation a few hundred KB for hundreds of tasks.
MAX_REPORT_BYTES = 16 * 1024 * 1024
MAX_EVALUATION_BYTES = 64 * 1024 * 1024
# Any other small JSON file mcu-arms writes beside them (a campaign run record, a stop request, an agent's report).
MAX_RECORD_BYTES = 16 * 1024 * 1024
# One line of a step log or event log: a step record keeps at most 4,000 characters of the reply and the info dict.
MAX_LINE_BYTES = 4 * 1024 * 1024
# Every number read: finite, and no larger in magnitude than this (a seed is the largest legitimate one).
MAX_NUMBER_MAGNITUDE = float(2**63)
