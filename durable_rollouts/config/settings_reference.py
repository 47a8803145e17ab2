"""Every environment setting of the project, with its default and meaning: the one source of the settings page.

Invariants (``tests/config/test_settings_reference.py``): every ``ROLLOUT_*``, ``SWE_*``, ``SHIM_*`` and
``SLIME_*`` name the code reads is listed here, and nothing else; ``docs/settings.md`` is exactly ``render()``
(``python -m durable_rollouts.config.settings_reference > docs/settings.md`` writes it; ``make docs`` does it first);
the defaults stated for the worker's and the trainer's numeric settings are the ones the readers return for an empty
environment. The Temporal connection's own variables (``TEMPORAL_*``) are the SDK's and have their own table
(``docs/running.md``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

Side = Literal["worker", "trainer", "both"]
SIDES: dict[Side, str] = {
    "worker": "Worker hosts (`worker.py`)",
    "trainer": "The trainer side (`starter.py`, `slime_generate`, `slime_rollout`)",
    "both": "Both sides",
}


@dataclass(frozen=True)
class Setting:
    """One variable: who reads it, its default as a person reads it, and what it does (Markdown)."""

    name: str
    side: Side
    default: str
    meaning: str


SETTINGS: tuple[Setting, ...] = (
    Setting("SWE_TIME_BUDGET_SEC", "both", "1800", "the agent's wall-clock budget per attempt, in seconds"),
    Setting("SWE_EVAL_TIMEOUT_SEC", "both", "600", "the grader's test-run timeout, in seconds"),
    Setting(
        "SWE_GENERATE_GUARD_SEC",
        "both",
        "budget + eval + pull + 180",
        "the whole rollout's guard (a workflow timer); when it fires the rollout ends `aborted: wall_clock_timeout`",
    ),
    Setting(
        "ROLLOUT_PULL_TIMEOUT_S",
        "both",
        "600",
        "how long a host may take to pull a task image it lacks, apart from the boot; a pull past it is "
        "`registry_unavailable` (retried, refilled in a group)",
    ),
    Setting(
        "ROLLOUT_RESUME_WINDOW_S",
        "both",
        "120",
        "how long a rollout whose host went silent waits for it to come back (same host id) before a fresh attempt "
        "starts on another host; lower it on spot hosts that do not come back",
    ),
    Setting("SHIM_BIND_HOST", "worker", "the host's address on `rollouts-sandbox`", "where the adapter listens"),
    Setting(
        "SHIM_PORT",
        "worker",
        "18001",
        "the adapter's port (sandboxes may reach only this port on the host; `0`: any free port)",
    ),
    Setting(
        "SLIME_HEAD_HOST", "worker", "the host's address on `rollouts-sandbox`", "the address sandboxes dial back to"
    ),
    Setting("SLIME_AGENT_CC_EXTRA_ARGS", "worker", "none", "extra Claude Code arguments (shell words)"),
    Setting("SLIME_AGENT_CC_EXTRA_ENVS", "worker", "none", "extra Claude Code environment (a JSON object of strings)"),
    Setting(
        "SWE_HOST_CC_TARBALL",
        "worker",
        "none: the npm install of `make setup`",
        "Claude Code from a host tarball (`npm pack` output): a native platform package, or the JavaScript CLI (≤ 2.0) "
        "with `SWE_HOST_NODE_TARBALL`; unpacked once per host and mounted read-only",
    ),
    Setting(
        "SWE_HOST_NODE_TARBALL",
        "worker",
        "none",
        "the Node tarball a JavaScript Claude Code CLI runs on (only with `SWE_HOST_CC_TARBALL`)",
    ),
    Setting(
        "ROLLOUT_TASK_QUEUE",
        "both",
        "`rl-rollouts`",
        "the shared task queue the workers poll and the trainer starts workflows on",
    ),
    Setting(
        "ROLLOUT_HOST_ID",
        "worker",
        "the host name",
        "this host's queue identity (`rl-rollouts-host-<id>`); a restarted worker with the same id takes its rollouts "
        "back",
    ),
    Setting(
        "ROLLOUT_AGENT_SLOTS",
        "worker",
        "4 × the host's CPUs",
        "concurrent agents per worker (`pick_host` refuses beyond); CPU, not memory, sets the limit (`python -m "
        "bench.host_capacity_bench`, [benchmarks](benchmarks.md))",
    ),
    Setting(
        "ROLLOUT_POLICY_URL",
        "worker",
        "none: each rollout's own `policy_url`",
        "the policy server (or router) every rollout on this worker uses",
    ),
    Setting(
        "ROLLOUT_POLICY_ENGINE",
        "both",
        "`sglang`",
        "the protocol of the policy server: `sglang` (`/generate`) or `vllm` (`/inference/v1/generate`, "
        "[vLLM](vllm.md)); "
        "a worker's default for rollouts whose spec names none; in the trainer's process, the engine the slime "
        "drop-ins' specs name",
    ),
    Setting(
        "ROLLOUT_TOKENIZER_DIR",
        "worker",
        "the offline Qwen3.6 tokenizer in `.cache/tokenizer`",
        "the policy's Hugging Face tokenizer directory, chat template included",
    ),
    Setting(
        "ROLLOUT_FINISH_GRACE_S",
        "worker",
        "5",
        "how long finishing an adapter session waits for its turns in flight before aborting them upstream "
        "(`/abort_request`); `0` aborts at once",
    ),
    Setting(
        "ROLLOUT_TOOL_CALL_PARSER",
        "worker",
        "`auto`",
        "the completion's tool-call parser, by SGLang's name, for rollouts whose policy names none",
    ),
    Setting(
        "ROLLOUT_REASONING_PARSER",
        "worker",
        "`qwen3`",
        "the completion's reasoning parser, by SGLang's name, for rollouts whose policy names none",
    ),
    Setting(
        "ROLLOUT_SLIME_SAMPLE_CONTRACT",
        "both",
        "`auto`",
        "the slime sample contract: `current`, `seed`, or `auto` (read off the installed slime)",
    ),
    Setting(
        "SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS",
        "trainer",
        "1024",
        "slime's fork/merge threshold of its `TrajectoryManager`, as slime's example reads it",
    ),
    Setting("ROLLOUT_METRICS_ADDRESS", "worker", "off", "`host:port` the worker serves Prometheus metrics on"),
    Setting(
        "ROLLOUT_PAYLOAD_BUCKET",
        "both",
        "none: the payload folder",
        "the S3-compatible bucket large Temporal payloads go to (with the standard `AWS_*` variables)",
    ),
    Setting(
        "ROLLOUT_PAYLOAD_DIR",
        "both",
        "`results/payloads`",
        "with no bucket: the folder large payloads go to, which only this machine's processes read",
    ),
    Setting(
        "ROLLOUT_PAYLOAD_THRESHOLD_BYTES",
        "both",
        "256 KiB",
        "a payload this large or larger goes to the bucket or folder; history keeps a reference",
    ),
    Setting(
        "ROLLOUT_PAYLOAD_MAX_BYTES",
        "both",
        "50 MiB",
        "the largest payload stored (at least 32 MiB); a larger one is refused",
    ),
    Setting(
        "ROLLOUT_RESULTS_DIR",
        "worker",
        "`results`",
        "this worker's adapter spool (`spool/<host queue>/`); no other process reads it",
    ),
    Setting("ROLLOUT_REAP_INTERVAL_S", "worker", "60", "how often the worker removes sandboxes whose rollout moved on"),
    Setting(
        "ROLLOUT_SERVER_WAIT_S",
        "both",
        "300",
        "how long a Temporal outage (or a server unreachable at start) is waited out before a rollout is `failed: "
        "server_unavailable` or the process stops with one line",
    ),
    Setting(
        "ROLLOUT_SANDBOX_CPUS",
        "worker",
        "the host's CPUs / `ROLLOUT_AGENT_SLOTS`, at least 1",
        "the CPU cap of every sandbox (agent and grading)",
    ),
    Setting(
        "ROLLOUT_SANDBOX_MEMORY_BYTES",
        "worker",
        "4G",
        "the memory cap of every sandbox (bytes, or with a `K`/`M`/`G`/`T` unit, powers of 1024)",
    ),
    Setting(
        "ROLLOUT_SANDBOX_DISK_BYTES",
        "worker",
        "10G",
        "what a sandbox may write after boot (same units; `0`: no budget)",
    ),
    Setting(
        "ROLLOUT_SANDBOX_OWNER",
        "worker",
        "the host name",
        "the owner label of every sandbox, so a test run finds what it leaked",
    ),
    Setting(
        "ROLLOUT_GRADING_OFFLINE",
        "worker",
        "1",
        "grading sandboxes get no network; `0` puts them on `rollouts-sandbox` like agent sandboxes",
    ),
    Setting(
        "ROLLOUT_OFFLINE_TOOLS",
        "worker",
        "1",
        "every sandbox gets the offline environment for pip, uv, conda, npm and Hugging Face",
    ),
    Setting(
        "ROLLOUT_PULL_POLICY",
        "worker",
        "missing",
        "task images: `missing` pulls one the engine lacks (once per host however many rollouts wait), `always` pulls "
        "before every boot, `never` boots only from what the engine holds (an absent image is `image_not_found`)",
    ),
    Setting(
        "ROLLOUT_IMAGE_MIRRORS",
        "worker",
        "none",
        "`SOURCE=TARGET` prefixes, comma-separated, that rewrite the name an image is pulled and booted by, e.g. "
        "`docker.io/swebench=mirror.local:5000/swebench` for a pull-through cache",
    ),
    Setting(
        "ROLLOUT_IMAGE_CACHE_BYTES",
        "worker",
        "0 (no budget)",
        "the disk budget of the task images a worker booted or pulled (same units as the sandbox sizes): past it, the "
        "least recently booted are removed, never one a container or a boot is using, never "
        "`rollout-base:bookworm`; an image's size counts the layers it shares",
    ),
    Setting(
        "ROLLOUT_IMAGE_AFFINITY",
        "worker",
        "1",
        "a host with a free slot whose engine lacks a rollout's image refuses it, 3 refusals in all (about a second), "
        "so hosts that hold it take it first; `0`: the first host with a free slot takes it",
    ),
    Setting(
        "ROLLOUT_PREFETCH_IMAGES",
        "trainer",
        "1",
        "the starter tells the fleet the images of the groups it starts next (one round of groups in flight ahead) and "
        "`slime_rollout` those of each group it draws, so hosts pull them while they run the current ones "
        "(`PrefetchImages`); `0`: boots pull what they lack",
    ),
    Setting(
        "ROLLOUT_REGISTRY",
        "worker",
        "none",
        "the registry (`host[:port]` as image names spell it; a URL's scheme and path are dropped, Docker Hub's other "
        "host names read as `docker.io`) the next two credentials are for; the three are set together or not at "
        "all",
    ),
    Setting(
        "ROLLOUT_REGISTRY_USERNAME",
        "worker",
        "none: Docker's `config.json`",
        "the user pulls from `ROLLOUT_REGISTRY` log in as",
    ),
    Setting("ROLLOUT_REGISTRY_PASSWORD", "worker", "none", "that user's password or token"),
    Setting(
        "ROLLOUT_DATASET_ROOT",
        "both",
        "none: rows may not name script paths",
        "the only directory a row's `swepro.*_script_path` may name files in (`--dataset-root`)",
    ),
    Setting(
        "ROLLOUT_RUN_ID",
        "trainer",
        "one per trainer process",
        "names the run's workflows; a restarted trainer with the same id re-attaches instead of re-running",
    ),
    Setting(
        "ROLLOUT_GROUP_FILTER",
        "trainer",
        "`keep_all`",
        "`slime_rollout`'s group filter: `keep_all`, `min_valid` or `nonzero_variance`",
    ),
    Setting(
        "ROLLOUT_MIN_VALID",
        "trainer",
        "the group's size",
        "valid samples a `slime_rollout` group needs to end `completed`",
    ),
    Setting(
        "ROLLOUT_REFILL_BUDGET",
        "trainer",
        "the group's size",
        "fresh children a `slime_rollout` group may start in place of infrastructure failures",
    ),
    Setting(
        "ROLLOUT_MAX_STALENESS",
        "trainer",
        "none: no bound",
        "how many weight versions a sampled token may lie behind the server's at merge",
    ),
    Setting(
        "ROLLOUT_STALENESS_POLICY", "trainer", "`mask`", "what a stale sample gets: `mask` its stale turns or `drop` it"
    ),
    Setting(
        "ROLLOUT_IMPOSSIBLE_SHARE",
        "trainer",
        "0",
        "the share of groups run as impossible-task probes, never trained on (`--impossible-share`)",
    ),
)


# Which value wins where several can set one: (what, the order, first wins). One table, here; other pages link to it.
PRECEDENCE: tuple[tuple[str, str], ...] = (
    (
        "a worker setting",
        "`worker.py --temporal-address / --host-id / --adapter-port`, then its variable, then its default",
    ),
    (
        "a starter setting",
        "the subcommand's flag (`--task-queue`, `--server-wait`, `--max-staleness`, `--staleness-policy`, "
        "`--impossible-share`, `--dataset-root`), then its variable, then its default",
    ),
    (
        "the policy server",
        "`worker.py --scripted-policy`, then the worker's `ROLLOUT_POLICY_URL` (either pins every rollout), then the "
        "rollout's `PolicySpec.policy_url` (`starter.py run --policy-url`, slime's router); with none the agent "
        "activity fails `NoPolicyServer`",
    ),
    (
        "the policy engine",
        "a pinned server's engine is the worker's `ROLLOUT_POLICY_ENGINE` (`sglang` for the scripted policy); "
        "otherwise the rollout's `PolicySpec.engine` (`--policy-engine`, the trainer's `ROLLOUT_POLICY_ENGINE`), then "
        "the worker's, then `sglang`",
    ),
    (
        "the completion parsers",
        "the rollout's `PolicySpec` parsers (slime's `--sglang-tool-call-parser` / `--sglang-reasoning-parser`), then "
        "the worker's `ROLLOUT_TOOL_CALL_PARSER` / `ROLLOUT_REASONING_PARSER`, then `auto` / `qwen3`",
    ),
    (
        "a turn's sampling",
        "the trainer's defaults, then the client's overrides, then the trainer's pins and caps "
        "([the adapter](adapter.md#sampling-parameters-and-stop-sequences))",
    ),
    (
        "a rollout's budgets",
        "the run's `SWE_*` / `ROLLOUT_PULL_TIMEOUT_S` are caps a task's own timeouts (Harbor's) can only lower; "
        "`SWE_GENERATE_GUARD_SEC` unset is budget + eval + pull + 180",
    ),
    (
        "the Temporal connection",
        "`--temporal-address` (the address alone), then the `TEMPORAL_*` variables, then a `temporal.toml` profile, "
        "then `localhost:7233` ([connecting](running.md#connecting-to-your-temporal-cluster))",
    ),
    ("the dataset root", "`--dataset-root`, then `ROLLOUT_DATASET_ROOT`, then none (script paths are refused)"),
    (
        "Claude Code",
        "`SWE_HOST_CC_TARBALL` (with `SWE_HOST_NODE_TARBALL`), then `CLAUDE_CODE_BINARY`, then the npm install under "
        "`.cache/claude-code`, then `claude` on `PATH`",
    ),
    (
        "the payload store's endpoint and region",
        "`AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`, then AWS; `AWS_REGION`, then `AWS_DEFAULT_REGION`, then "
        "`us-east-1`",
    ),
)


def render() -> str:
    """``docs/settings.md``: one table per side, the variables in the order listed here."""
    parts = [
        "# Settings reference\n",
        "Every environment variable the project reads, its default and what it does. This page is generated from",
        "`durable_rollouts/config/settings_reference.py` (`python -m durable_rollouts.config.settings_reference > "
        "docs/settings.md`; `make docs` does it), and",
        "the suite fails when the code reads a variable this page does not list. The Temporal connection's own",
        "variables (`TEMPORAL_ADDRESS`, TLS, API keys, profiles) are in",
        "[Connecting to your Temporal cluster](running.md#connecting-to-your-temporal-cluster).\n",
    ]
    for side, title in SIDES.items():
        parts += [f"## {title}\n", "| variable | default | meaning |", "|---|---|---|"]
        parts += [f"| `{s.name}` | {s.default} | {s.meaning} |" for s in SETTINGS if s.side == side]
        parts.append("")
    parts += ["## Which value wins\n", "| setting | order (the first that is set wins) |", "|---|---|"]
    parts += [f"| {what} | {order} |" for what, order in PRECEDENCE]
    parts.append("")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(render())
