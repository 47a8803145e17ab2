"""Adapter load benchmark: adapter CPU per turn and event-loop lag, "ours" vs "naive".

Three processes on 127.0.0.1: a zero-latency SGLang ``/generate`` stand-in; the shipped ``AdapterServer`` plus a
control port that meters the whole process's CPU, the loop thread's CPU and the event loop's lag; and, in this
process, agent loops in the style of Claude Code whose prompts grow by a chunk of real source code every turn.
Scenario ``cpu`` meters CPU per turn at several context sizes (``--sessions`` in lock-step up to ``--context``);
scenario ``lag`` meters the loop's lag under ``--lag-sessions`` saturating agent loops.

Baseline, in the same adapter process on fresh sessions: "naive", the session with its ledger swapped for
``NaiveLedger`` (render and tokenise the whole conversation every turn) and its CPU pool for ``InlineCPU`` (that
work on the event-loop thread). No pass/fail: it prints numbers and whether the project's stated targets are met.
Set-up, options and results: docs/benchmarks.md, "Adapter load". Run from the repository root::

    .venv/bin/python -m bench.adapter_bench [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import resource
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.harness.child_roles import (
    BenchError,
    announce_ready,
    read_ready,
    start_role,
    stop_process,
    until_told_to_stop,
)
from bench.harness.stats import percentile

END_OF_TURN_ID = 248046
COMPLETION = "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>"
LAG_INTERVAL_S = 0.010
REQUEST_TIMEOUT_S = 600.0
VARIANTS = ("ours", "naive")


# --------------------------------------------------------------------------------------------
# policy process: zero-latency SGLang /generate
# --------------------------------------------------------------------------------------------


async def policy_main(args: argparse.Namespace) -> None:
    from durable_rollouts.policy.prompt_renderer import PromptRenderer

    renderer = PromptRenderer.from_folder(args.tokenizer)
    end_id = renderer.end_of_turn_id
    if end_id != END_OF_TURN_ID:
        print(f"note: end-of-turn id is {end_id}, not {END_OF_TURN_ID}", file=sys.stderr)
    ids = renderer.encode(COMPLETION) + [end_id]
    reply = json.dumps(
        {
            "text": renderer.decode(ids),
            "output_ids": ids,
            "meta_info": {
                "id": "bench",
                "finish_reason": {"type": "stop", "matched": end_id},
                "prompt_tokens": 0,
                "completion_tokens": len(ids),
                "cached_tokens": 0,
                "e2e_latency": 0.0,
                "output_token_logprobs": [[-0.1, token, None] for token in ids],
            },
        }
    ).encode()
    served = 0

    async def generate(request: web.Request) -> web.Response:
        nonlocal served
        await request.read()
        if args.policy_delay_ms:
            await asyncio.sleep(args.policy_delay_ms / 1000.0)
        served += 1
        return web.Response(body=reply, content_type="application/json")

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"cpu_s": time.process_time(), "served": served})

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post("/generate", generate)
    app.router.add_post("/abort_request", lambda r: web.json_response({}))
    app.router.add_get("/bench/stats", stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    announce_ready(f"http://127.0.0.1:{port}")
    try:
        await until_told_to_stop()
    finally:
        await runner.cleanup()


# --------------------------------------------------------------------------------------------
# adapter process: the shipped AdapterServer + a control app
# --------------------------------------------------------------------------------------------


class InlineCPU:
    """Stands in for the adapter's ``FairExecutor``: runs every call at once, on the event-loop thread."""

    async def run(self, key, fn, *args):
        return fn(*args)


def naive_ledger_class():
    from array import array

    from durable_rollouts.policy.token_capture import PromptPlan, TokenLedger

    class NaiveLedger(TokenLedger):
        """Every turn: render the whole conversation and tokenise all of it; no incremental reuse.

        The resulting prompt still joins a segment when it extends that segment's
        tokens exactly (as the shipped ledger's fallback does), so ``record`` does
        the same work in both variants.
        """

        def plan(self, lane, kind, messages, tools):
            messages = [self._recorded_reply(m) for m in messages]
            prompt = array("i", self._renderer.encode(self._renderer.render(messages, tools, True)))
            for segment in reversed(self.segments):
                if segment.lane != lane or segment.kind != kind or segment.tools != tools:
                    continue
                n = len(segment.tokens)
                if len(prompt) > n and prompt[:n] == segment.tokens:
                    return PromptPlan(lane, kind, messages, tools, prompt, "extend", segment, len(prompt))
            return PromptPlan(lane, kind, messages, tools, prompt, "fresh", None, len(prompt))

    return NaiveLedger


class Meter:
    """CPU, turns and event-loop lag of this process between ``start`` and ``stop``."""

    def __init__(self, counters: dict[str, int]):
        self.counters = counters
        self._task: asyncio.Task | None = None
        self._lags: list[float] = []
        self._gc: list[tuple[int, float, float]] = []
        self._gc_started = (0.0, 0.0)
        self._profiler = None
        self._profile_path: str | None = None
        self._t0: dict[str, float] = {}

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        # Runs on whichever thread triggered the collection; thread_time shows its CPU, perf_counter
        # its wall time (larger when the OS deschedules the collecting thread).
        if phase == "start":
            self._gc_started = (time.perf_counter(), time.thread_time())
        else:
            wall0, cpu0 = self._gc_started
            self._gc.append((info["generation"], time.perf_counter() - wall0, time.thread_time() - cpu0))

    @staticmethod
    def _cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def start(self, profile_path: str | None = None) -> None:
        if self._task is not None:
            raise RuntimeError("meter already running")
        self._profile_path = profile_path
        self._profiler = None
        if profile_path:
            import cProfile

            self._profiler = cProfile.Profile()  # every thread since Python 3.12 (sys.monitoring), not the loop alone
            self._profiler.enable()
        self._lags = []
        self._gc = []
        gc.callbacks.append(self._on_gc)
        self._t0 = {
            "cpu": self._cpu(),
            "loop_cpu": time.thread_time(),  # handlers run on the loop thread
            "wall": time.perf_counter(),
            "turns": self.counters["turns"],
            "prompt_tokens": self.counters["prompt_tokens"],
        }
        self._task = asyncio.get_running_loop().create_task(self._monitor())

    async def stop(self) -> dict[str, Any]:
        if self._task is None:
            raise RuntimeError("meter not running")
        cpu, loop_cpu, wall = self._cpu(), time.thread_time(), time.perf_counter()
        if self._profiler is not None:
            self._profiler.disable()
            Path(self._profile_path).parent.mkdir(parents=True, exist_ok=True)
            self._profiler.dump_stats(self._profile_path)
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        gc.callbacks.remove(self._on_gc)
        full = [d for g, d, _ in self._gc if g == 2]
        return {
            "cpu_s": cpu - self._t0["cpu"],
            "loop_cpu_s": loop_cpu - self._t0["loop_cpu"],
            "wall_s": wall - self._t0["wall"],
            "turns": self.counters["turns"] - self._t0["turns"],
            "prompt_tokens": self.counters["prompt_tokens"] - self._t0["prompt_tokens"],
            "lags_ms": [round(lag * 1000.0, 3) for lag in self._lags],
            "gc": {
                "collections": len(self._gc),
                "total_ms": 1000.0 * sum(d for _, d, _ in self._gc),
                "cpu_ms": 1000.0 * sum(c for _, _, c in self._gc),
                "max_ms": 1000.0 * max((d for _, d, _ in self._gc), default=0.0),
                "by_gen": {g: [round(1000.0 * d, 2) for gg, d, _ in self._gc if gg == g] for g in (0, 1, 2)},
                "gen2": len(full),
                "gen2_max_ms": 1000.0 * max(full, default=0.0),
            },
        }

    async def _monitor(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(LAG_INTERVAL_S)
            self._lags.append(max(0.0, time.perf_counter() - t0 - LAG_INTERVAL_S))


async def adapter_main(args: argparse.Namespace) -> None:
    from durable_rollouts.contracts.session import SamplingParams, SessionConfig
    from durable_rollouts.policy.adapter_server import AdapterServer
    from durable_rollouts.policy.prompt_renderer import PromptRenderer

    renderer = PromptRenderer.from_folder(args.tokenizer)
    counters = {"turns": 0, "prompt_tokens": 0}
    threads = {"cpu_threads": args.cpu_threads} if args.cpu_threads else {}
    server = AdapterServer(renderer, **threads)
    url = await server.start()
    # What-if knobs (off by default): the shipped adapter sets neither.
    if args.what_if_switch_interval:
        sys.setswitchinterval(args.what_if_switch_interval)
    if args.what_if_gc_freeze:
        gc.collect()
        gc.freeze()
    registry = server.registry
    NaiveLedger = naive_ledger_class()
    inline = InlineCPU()
    meter = Meter(counters)
    plan_logs: dict[str, list[tuple[str, int]]] = {}

    def instrument(session_id: str, ledger) -> None:
        """Log each plan's mode and how many tokens it tokenised (one list append per turn), and count the turn
        and its prompt's tokens (a turn is planned once)."""
        log = plan_logs[session_id] = []
        inner = ledger.plan

        def plan(*a, **kw):
            result = inner(*a, **kw)
            log.append((result.mode, result.rendered_tokens))
            counters["turns"] += 1
            counters["prompt_tokens"] += result.prompt_length
            return result

        ledger.plan = plan

    async def open_sessions(request: web.Request) -> web.Response:
        body = await request.json()
        opened = []
        for _ in range(int(body["count"])):
            config = SessionConfig(
                policy_url=body["policy_url"],
                sampling=SamplingParams(max_new_tokens=8192),
                context_budget=int(body["context_budget"]),
                max_turns=int(body["max_turns"]),
                label=f"bench-{body['variant']}",
            )
            ticket = registry.open_session(config)
            session = registry.get(ticket.session_id)
            if body["variant"] == "naive":
                # Bench-only surgery on private state: the naive variant is the shipped
                # session with a full-re-tokenising ledger and no CPU pool.
                session.ledger = NaiveLedger(renderer)
                session._cpu = inline
            instrument(ticket.session_id, session.ledger)
            opened.append({"id": ticket.session_id, "secret": ticket.secret})
        return web.json_response(opened)

    async def finish_sessions(request: web.Request) -> web.Response:
        body = await request.json()
        segments, turns, modes, tokenised = [], 0, {}, 0
        for session_id in body["ids"]:
            result = await registry.finish_session(session_id)
            registry._finished.pop(session_id, None)  # bench-only: keep the process from growing
            registry._finished_secrets.pop(session_id, None)
            segments.append(len(result.segments))
            turns += len(result.turns)
            for mode, tokens in plan_logs.pop(session_id, []):
                modes[mode] = modes.get(mode, 0) + 1
                tokenised += tokens
        return web.json_response({"segments": segments, "turns": turns, "modes": modes, "tokenised": tokenised})

    async def measure_start(request: web.Request) -> web.Response:
        meter.start((await request.json()).get("profile"))
        return web.json_response({})

    async def measure_stop(request: web.Request) -> web.Response:
        return web.json_response(await meter.stop())

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"cpu_s": Meter._cpu(), "live": registry.live_count, **counters})

    control = web.Application()
    control.router.add_post("/open", open_sessions)
    control.router.add_post("/finish", finish_sessions)
    control.router.add_post("/measure/start", measure_start)
    control.router.add_post("/measure/stop", measure_stop)
    control.router.add_get("/stats", stats)
    control_runner = web.AppRunner(control, access_log=None)
    await control_runner.setup()
    await web.TCPSite(control_runner, "127.0.0.1", 0).start()
    control_url = f"http://127.0.0.1:{control_runner.addresses[0][1]}"
    announce_ready(url, control_url)
    try:
        await until_told_to_stop()
    finally:
        await control_runner.cleanup()
        await server.stop()


# --------------------------------------------------------------------------------------------
# clients: Claude-Code-like agent loops
# --------------------------------------------------------------------------------------------

SYSTEM_PROMPT = """You are an interactive command-line coding agent. You help users with software engineering tasks in the repository they have open. Use the instructions below and the tools available to you to assist the user.

IMPORTANT: Assist with defensive security tasks only. Refuse to create, modify, or improve code that may be used maliciously.
IMPORTANT: Never generate or guess URLs for the user unless you are confident that the URLs are for helping the user with programming.

# Tone and style
Be concise, direct, and to the point. Your output is displayed in a terminal, rendered as GitHub-flavored markdown in a monospace font. Answer the user's question directly, without preamble or postamble, unless they ask for detail. Only use emojis if the user explicitly requests it. Output text to communicate with the user; everything you output outside of tool use is displayed to the user. Never use tools like Bash or code comments as a means to communicate with the user during the session.

# Proactiveness
You are allowed to be proactive, but only when the user asks you to do something. Strike a balance between doing the right thing when asked, including taking actions and follow-up actions, and not surprising the user with actions you take without asking. If the user asks how to approach something, answer their question first and do not immediately jump into taking actions.

# Following conventions
When making changes to files, first understand the file's code conventions. Mimic code style, use existing libraries and utilities, and follow existing patterns.
- NEVER assume that a given library is available, even if it is well known. Whenever you write code that uses a library or framework, first check that this codebase already uses the given library: look at neighboring files, or check the package manifest.
- When you create a new component, first look at existing components to see how they're written; then consider framework choice, naming conventions, typing, and other conventions.
- When you edit a piece of code, first look at the code's surrounding context (especially its imports) to understand the code's choice of frameworks and libraries. Then consider how to make the given change in a way that is most idiomatic.
- Always follow security best practices. Never introduce code that exposes or logs secrets and keys. Never commit secrets or keys to the repository.

# Code style
- Do not add comments to the code you write, unless the user asks you to, or the code is complex and requires additional context.

# Task management
Use the TodoWrite tool frequently to plan and track tasks, giving the user visibility into your progress. Mark todos as completed as soon as you are done with a task; do not batch up multiple tasks before marking them as completed.

# Doing tasks
The user will primarily request you perform software engineering tasks: solving bugs, adding new functionality, refactoring code, explaining code, and more. For these tasks the following steps are recommended:
- Use the available search tools to understand the codebase and the user's query. Use the search tools extensively, both in parallel and sequentially.
- Implement the solution using all tools available to you.
- Verify the solution if possible with tests. NEVER assume a specific test framework or test script; check the README or search the codebase to determine the testing approach.
- When you have completed a task, you MUST run the lint and typecheck commands (e.g. npm run lint, ruff, mypy) if they were provided to you, to ensure your code is correct.
NEVER commit changes unless the user explicitly asks you to.

# Tool usage policy
- When doing file search, prefer to use the Task tool in order to reduce context usage.
- You have the capability to call multiple tools in a single response. When multiple independent pieces of information are requested, batch your tool calls together for optimal performance.
- When making multiple bash tool calls, you MUST send a single message with multiple tool calls to run the calls in parallel.

You MUST answer concisely with fewer than 4 lines of text (not including tool use or code generation), unless the user asks for detail.

Here is useful information about the environment you are running in:
<env>
Working directory: /repo
Is directory a git repo: Yes
Platform: linux
OS Version: Linux 6.8.0
Today's date: 2026-03-14
</env>
You are powered by the model slime-actor.

# Code References
When referencing specific functions or pieces of code include the pattern `file_path:line_number` to allow the user to easily navigate to the source code location.
"""  # noqa: E501


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }


TOOLS: list[dict[str, Any]] = [
    {
        "name": "Bash",
        "description": "Executes a given bash command in a persistent shell session with optional timeout, ensuring "
        "proper handling and security measures.\n\nBefore executing the command, please follow these steps:\n1. "
        "Directory Verification: if the command will create new directories or files, first use ls to verify the "
        "parent directory exists and is the correct location.\n2. Command Execution: always quote file paths that "
        "contain spaces with double quotes. After ensuring proper quoting, execute the command and capture its "
        "output.\n\nUsage notes:\n- The command argument is required.\n- You can specify an optional timeout in "
        "milliseconds (up to 600000ms / 10 minutes). If not specified, commands will timeout after 120000ms (2 "
        "minutes).\n- If the output exceeds 30000 characters, output will be truncated before being returned to "
        "you.\n- VERY IMPORTANT: You MUST avoid using search commands like `find` and `grep`. Instead use Grep, "
        "Glob, or Task to search. You MUST avoid read tools like `cat`, `head`, `tail`, and `ls`, and use Read "
        "and LS to read files.\n- When issuing multiple commands, use the ';' or '&&' operator to separate them. "
        "DO NOT use newlines (newlines are ok in quoted strings).\n- Try to maintain your current working "
        "directory throughout the session by using absolute paths and avoiding usage of `cd`.",
        "input_schema": _schema(
            {
                "command": {"type": "string", "description": "The command to execute"},
                "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"},
                "description": {
                    "type": "string",
                    "description": "Clear, concise description of what this command does in 5-10 words.",
                },
            },
            ["command"],
        ),
    },
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem. You can access any file directly by using this "
        "tool.\n\nUsage:\n- The file_path parameter must be an absolute path, not a relative path\n- By default, "
        "it reads up to 2000 lines starting from the beginning of the file\n- You can optionally specify a line "
        "offset and limit (especially handy for long files), but it's recommended to read the whole file by not "
        "providing these parameters\n- Any lines longer than 2000 characters will be truncated\n- Results are "
        "returned using cat -n format, with line numbers starting at 1\n- You have the capability to call "
        "multiple tools in a single response. It is always better to speculatively read multiple files as a batch "
        "that are potentially useful.",
        "input_schema": _schema(
            {
                "file_path": {"type": "string", "description": "The absolute path to the file to read"},
                "offset": {"type": "number", "description": "The line number to start reading from"},
                "limit": {"type": "number", "description": "The number of lines to read"},
            },
            ["file_path"],
        ),
    },
    {
        "name": "Edit",
        "description": "Performs exact string replacements in files.\n\nUsage:\n- You must use your `Read` tool at "
        "least once in the conversation before editing. This tool will error if you attempt an edit without "
        "reading the file.\n- When editing text from Read tool output, ensure you preserve the exact indentation "
        "(tabs/spaces) as it appears AFTER the line number prefix.\n- ALWAYS prefer editing existing files in the "
        "codebase. NEVER write new files unless explicitly required.\n- The edit will FAIL if `old_string` is not "
        "unique in the file. Either provide a larger string with more surrounding context to make it unique or "
        "use `replace_all` to change every instance of `old_string`.",
        "input_schema": _schema(
            {
                "file_path": {"type": "string", "description": "The absolute path to the file to modify"},
                "old_string": {"type": "string", "description": "The text to replace"},
                "new_string": {
                    "type": "string",
                    "description": "The text to replace it with (must be different from old_string)",
                },
                "replace_all": {
                    "type": "boolean",
                    "default": False,
                    "description": "Replace all occurences of old_string (default false)",
                },
            },
            ["file_path", "old_string", "new_string"],
        ),
    },
    {
        "name": "Write",
        "description": "Writes a file to the local filesystem. This tool will overwrite the existing file if there is "
        "one at the provided path. If this is an existing file, you MUST use the Read tool first to read the "
        "file's contents.",
        "input_schema": _schema(
            {
                "file_path": {
                    "type": "string",
                    "description": "The absolute path to the file to write (must be absolute, not relative)",
                },
                "content": {"type": "string", "description": "The content to write to the file"},
            },
            ["file_path", "content"],
        ),
    },
    {
        "name": "Glob",
        "description": "- Fast file pattern matching tool that works with any codebase size\n- Supports glob patterns "
        'like "**/*.js" or "src/**/*.ts"\n- Returns matching file paths sorted by modification time\n- Use this '
        "tool when you need to find files by name patterns",
        "input_schema": _schema(
            {
                "pattern": {"type": "string", "description": "The glob pattern to match files against"},
                "path": {
                    "type": "string",
                    "description": "The directory to search in. Defaults to the current working directory.",
                },
            },
            ["pattern"],
        ),
    },
    {
        "name": "Grep",
        "description": "A powerful search tool built on ripgrep.\n\nUsage:\n- ALWAYS use Grep for search tasks. NEVER "
        'invoke `grep` or `rg` as a Bash command.\n- Supports full regex syntax (e.g., "log.*Error", '
        '"function\\s+\\w+")\n- Filter files with glob parameter (e.g., "*.js", "**/*.tsx") or type parameter '
        '(e.g., "js", "py", "rust")\n- Output modes: "content" shows matching lines, "files_with_matches" shows '
        'only file paths (default), "count" shows match counts',
        "input_schema": _schema(
            {
                "pattern": {
                    "type": "string",
                    "description": "The regular expression pattern to search for in file contents",
                },
                "path": {
                    "type": "string",
                    "description": "File or directory to search in. Defaults to current working directory.",
                },
                "glob": {"type": "string", "description": "Glob pattern to filter files"},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
                "-n": {"type": "boolean", "description": "Show line numbers in output"},
            },
            ["pattern"],
        ),
    },
    {
        "name": "TodoWrite",
        "description": "Use this tool to create and manage a structured task list for your current coding session. "
        "This helps you track progress, organize complex tasks, and demonstrate thoroughness to the user.",
        "input_schema": _schema(
            {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "id": {"type": "string"},
                        },
                        "required": ["content", "status", "id"],
                    },
                }
            },
            ["todos"],
        ),
    },
]

FIRST_USER_TURN = [
    {
        "type": "text",
        "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# "
        "important-instruction-reminders\nDo what has been asked; nothing more, nothing less.\nNEVER create files "
        "unless they're absolutely necessary for achieving your goal.\nALWAYS prefer editing an existing file to "
        "creating a new one.\n</system-reminder>",
    },
    {
        "type": "text",
        "text": "The event loop stalls under load in our asyncio service. Read through the relevant standard-library "
        "modules and explain where a slow callback would block other tasks, then propose a fix.\nPrimary working "
        "directory: /repo",
    },
]

CORPUS_FILES = [
    "asyncio/base_events.py",
    "asyncio/tasks.py",
    "asyncio/streams.py",
    "asyncio/selector_events.py",
    "json/decoder.py",
    "json/encoder.py",
    "argparse.py",
    "dataclasses.py",
    "typing.py",
    "pathlib.py",
    "subprocess.py",
    "inspect.py",
    "concurrent/futures/thread.py",
    "logging/__init__.py",
]


def load_corpus() -> list[tuple[str, list[str]]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for name in CORPUS_FILES:
        path = stdlib / name
        if path.is_file():
            files.append((f"/repo/lib/{name}", path.read_text(encoding="utf-8", errors="replace").splitlines()))
    if not files:
        raise SystemExit("no standard-library source files found for the corpus")
    return files


class ChunkSource:
    """Deterministic ``Read``-tool outputs (``cat -n`` with an arrow) of 4-8k characters each."""

    def __init__(self, corpus: list[tuple[str, list[str]]], seed: int):
        self._corpus = corpus
        self._rng = random.Random(seed)
        self._file = self._rng.randrange(len(corpus))
        self._line = self._rng.randrange(max(1, len(corpus[self._file][1]) - 200))

    def next(self) -> str:
        target = self._rng.randint(4000, 8000)
        out: list[str] = []
        size = 0
        while size < target:
            _, lines = self._corpus[self._file]
            if self._line >= len(lines):
                self._file, self._line = (self._file + 1) % len(self._corpus), 0
                continue
            line = f"{self._line + 1:>6}\u2192{lines[self._line]}"
            out.append(line)
            size += len(line) + 1
            self._line += 1
        return "\n".join(out)


@dataclass
class Conversation:
    index: int
    secret: str
    chunks: ChunkSource
    session_id: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    next_chunk: str = ""
    prompt_tokens: int = 0
    chars_per_token: float = 3.5
    turns: int = 0

    def __post_init__(self) -> None:
        self.messages = [{"role": "user", "content": [dict(b) for b in FIRST_USER_TURN]}]

    def body(self) -> dict[str, Any]:
        # Claude Code marks the newest block for prompt caching; the adapter ignores it.
        messages = list(self.messages)
        last = dict(messages[-1])
        blocks = [dict(b) for b in last["content"]]
        blocks[-1]["cache_control"] = {"type": "ephemeral"}
        last["content"] = blocks
        messages[-1] = last
        return {
            "model": "slime-actor",
            "max_tokens": 32000,
            "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
            "tools": TOOLS,
            "messages": messages,
            "metadata": {"user_id": f"bench-user-{self.index}"},
            "stream": False,
        }

    def absorb(self, reply: dict[str, Any]) -> None:
        uses = [b for b in reply.get("content", []) if b.get("type") == "tool_use"]
        if reply.get("stop_reason") != "tool_use" or not uses:
            raise BenchError(f"session {self.index}: expected a tool_use reply, got {json.dumps(reply)[:300]}")
        prompt = int(reply["usage"]["input_tokens"])
        if self.turns and self.next_chunk:
            grown = prompt - self.prompt_tokens
            if grown > 0:
                self.chars_per_token = len(self.next_chunk) / grown
        self.prompt_tokens = prompt
        self.turns += 1
        self.next_chunk = self.chunks.next()
        self.messages.append({"role": "assistant", "content": reply["content"]})
        results = [{"type": "tool_result", "tool_use_id": b["id"], "content": self.next_chunk} for b in uses]
        self.messages.append({"role": "user", "content": results})

    def next_prompt_estimate(self) -> int:
        return self.prompt_tokens + int(len(self.next_chunk) / self.chars_per_token) + 64

    def done(self, context: int, max_turns: int) -> bool:
        return self.turns >= max_turns or self.next_prompt_estimate() > context


@dataclass
class Bench:
    http: aiohttp.ClientSession
    adapter_url: str
    control_url: str
    policy_url: str
    corpus: list[tuple[str, list[str]]]
    seed: int
    max_turns: int

    async def control(self, path: str, payload: dict[str, Any] | None = None) -> Any:
        async with self.http.post(f"{self.control_url}{path}", json=payload or {}) as response:
            if response.status != 200:
                raise BenchError(f"control {path}: HTTP {response.status}: {(await response.text())[:300]}")
            return await response.json()

    async def stats(self) -> tuple[float, float]:
        async with self.http.get(f"{self.control_url}/stats") as r:
            adapter = (await r.json())["cpu_s"]
        async with self.http.get(f"{self.policy_url}/bench/stats") as r:
            policy = (await r.json())["cpu_s"]
        return adapter, policy

    async def open(self, variant: str, count: int, context: int, first_index: int = 0) -> list[Conversation]:
        opened = await self.control(
            "/open",
            {
                "policy_url": self.policy_url,
                "variant": variant,
                "count": count,
                "context_budget": context + 16384,
                "max_turns": self.max_turns + 10,
            },
        )
        return [
            Conversation(
                first_index + i, o["secret"], ChunkSource(self.corpus, self.seed * 1_000_000 + first_index + i), o["id"]
            )
            for i, o in enumerate(opened)
        ]

    async def finish(self, conversations: list[Conversation]) -> dict[str, Any]:
        return await self.control("/finish", {"ids": [c.session_id for c in conversations]})

    async def turn(self, conversation: Conversation) -> int:
        data = json.dumps(conversation.body()).encode()
        headers = {
            "Authorization": f"Bearer {conversation.secret}",
            "Content-Type": "application/json",
            "anthropic-version": "2023-06-01",
        }
        async with self.http.post(f"{self.adapter_url}/v1/messages", data=data, headers=headers) as response:
            if response.status != 200:
                raise BenchError(
                    f"session {conversation.index}: HTTP {response.status}: {(await response.text())[:300]}"
                )
            reply = await response.json()
        conversation.absorb(reply)
        return conversation.prompt_tokens


# --------------------------------------------------------------------------------------------
# scenarios
# --------------------------------------------------------------------------------------------


def lag_stats(lags: list[float]) -> dict[str, float]:
    return {
        "n": len(lags),
        "p50": percentile(lags, 50),
        "p99": percentile(lags, 99),
        "max": max(lags) if lags else float("nan"),
    }


async def warm_up(bench: Bench) -> None:
    """A few unmeasured turns per variant: template compilation, connection pools, first-touch costs."""
    for variant in VARIANTS:
        conversations = await bench.open(variant, 2, 16384)
        for _ in range(3):
            await asyncio.gather(*(bench.turn(c) for c in conversations))
        await bench.finish(conversations)


async def idle_lag(bench: Bench) -> dict[str, float]:
    await bench.control("/measure/start")
    await asyncio.sleep(1.0)
    return lag_stats((await bench.control("/measure/stop"))["lags_ms"])


async def scenario_cpu(bench: Bench, variant: str, sessions: int, context: int) -> dict[str, Any]:
    """Lock-step rounds: every live session does one turn per round; each round is metered."""
    conversations = await bench.open(variant, sessions, context)
    live = list(conversations)
    rounds = []
    lags: list[float] = []
    gcs: list[dict[str, float]] = []
    while live:
        await bench.control("/measure/start")
        prompts = await asyncio.gather(*(bench.turn(c) for c in live))
        m = await bench.control("/measure/stop")
        if m["turns"] != len(live):
            raise BenchError(f"round metered {m['turns']} turns, expected {len(live)}")
        lags += m["lags_ms"]
        gcs.append(m["gc"])
        rounds.append(
            {
                "sessions": len(live),
                "mean_prompt": sum(prompts) / len(prompts),
                "cpu_ms_per_turn": 1000.0 * m["cpu_s"] / m["turns"],
                "loop_ms_per_turn": 1000.0 * m["loop_cpu_s"] / m["turns"],
                "wall_s": m["wall_s"],
            }
        )
        live = [c for c in live if not c.done(context, bench.max_turns)]
    ledger = await bench.finish(conversations)
    total_turns = sum(r["sessions"] for r in rounds)
    return {
        "variant": variant,
        "rounds": rounds,
        "turns": total_turns,
        "max_prompt": max(c.prompt_tokens for c in conversations),
        "cpu_ms_per_turn_all": sum(r["cpu_ms_per_turn"] * r["sessions"] for r in rounds) / total_turns,
        "lag": lag_stats(lags),
        "gc": merge_gc(gcs),
        "ledger": ledger,
    }


def merge_gc(parts: list[dict[str, float]]) -> dict[str, float]:
    return {
        "collections": sum(p["collections"] for p in parts),
        "total_ms": sum(p["total_ms"] for p in parts),
        "cpu_ms": sum(p["cpu_ms"] for p in parts),
        "max_ms": max((p["max_ms"] for p in parts), default=0.0),
        "gen2": sum(p["gen2"] for p in parts),
        "gen2_max_ms": max((p["gen2_max_ms"] for p in parts), default=0.0),
    }


def gc_note(g: dict[str, float]) -> str:
    return (
        f"GC {g['collections']} collections, {g['total_ms']:.0f} ms wall ({g['cpu_ms']:.0f} ms CPU) total, max "
        f"{g['max_ms']:.1f} ms ({g['gen2']} full, max {g['gen2_max_ms']:.1f} ms)"
    )


def cpu_at(rounds: list[dict[str, Any]], size: int, key: str = "cpu_ms_per_turn") -> tuple[float, float]:
    """Per-turn value averaged over the two rounds whose mean prompt is nearest ``size``."""
    nearest = sorted(rounds, key=lambda r: abs(r["mean_prompt"] - size))[:2]
    turns = sum(r["sessions"] for r in nearest)
    value = sum(r[key] * r["sessions"] for r in nearest) / turns
    prompt = sum(r["mean_prompt"] * r["sessions"] for r in nearest) / turns
    return value, prompt


async def scenario_lag(
    bench: Bench, variant: str, slots: int, context: int, warmup_s: float, window_s: float, profile: str | None
) -> dict[str, Any]:
    """Steady load: ``slots`` agent loops, each running back-to-back conversations (a fresh
    session each) from the first turn up to ``context`` tokens, with no think time. The meter
    runs for ``window_s`` after ``warmup_s``; every slot is busy for the whole window."""
    stopping = asyncio.Event()
    ledgers: list[dict[str, Any]] = []
    conversations: list[Conversation] = []

    async def slot(k: int) -> None:
        n = 0
        while not stopping.is_set():
            (conversation,) = await bench.open(variant, 1, context, first_index=k * 1000 + n)
            conversations.append(conversation)
            n += 1
            while not stopping.is_set():
                await bench.turn(conversation)
                if conversation.done(context, bench.max_turns):
                    break
            ledgers.append(await bench.finish([conversation]))

    async def run_for(seconds: float) -> None:
        done, _ = await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # a slot only ends early by failing: re-raise its error

    started = time.perf_counter()
    tasks = [asyncio.ensure_future(slot(k)) for k in range(slots)]
    try:
        await run_for(warmup_s)
        await bench.control("/measure/start", {"profile": profile})
        try:
            await run_for(window_s)
        finally:
            m = await bench.control("/measure/stop")
        stopping.set()
        await asyncio.wait_for(asyncio.gather(*tasks), REQUEST_TIMEOUT_S)
    finally:
        for task in tasks:
            task.cancel()
    ledger = {"segments": [], "turns": 0, "modes": {}, "tokenised": 0}
    for part in ledgers:
        ledger["segments"] += part["segments"]
        ledger["turns"] += part["turns"]
        ledger["tokenised"] += part["tokenised"]
        for mode, count in part["modes"].items():
            ledger["modes"][mode] = ledger["modes"].get(mode, 0) + count
    if not m["turns"]:
        raise BenchError(f"[lag] {variant}: no turn completed inside the measurement window")
    return {
        "variant": variant,
        "conversations": len(conversations),
        "turns": sum(c.turns for c in conversations),
        "max_prompt": max(c.prompt_tokens for c in conversations),
        "wall_s": time.perf_counter() - started,
        "ledger": ledger,
        "window": {
            "turns": m["turns"],
            "wall_s": m["wall_s"],
            "turns_per_s": m["turns"] / m["wall_s"],
            "mean_prompt": m["prompt_tokens"] / m["turns"],
            "cpu_ms_per_turn": 1000.0 * m["cpu_s"] / m["turns"],
            "loop_ms_per_turn": 1000.0 * m["loop_cpu_s"] / m["turns"],
            "adapter_cpu_util": m["cpu_s"] / m["wall_s"],
            "lag": lag_stats(m["lags_ms"]),
            "gc": m["gc"],
        },
    }


# --------------------------------------------------------------------------------------------
# orchestration and report
# --------------------------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


def ledger_note(ledger: dict[str, Any], sessions: int) -> str:
    per_turn = ledger["tokenised"] / max(1, ledger["turns"])
    return (
        f"modes {ledger['modes']}, segments/session {sum(ledger['segments']) / max(1, sessions):.2f}, tokens "
        f"tokenised/turn {per_turn:.0f}"
    )


def report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    p = print
    what_if = [f"switch interval {args.what_if_switch_interval:g} s"] if args.what_if_switch_interval else []
    what_if += ["gc.freeze() at start-up"] if args.what_if_gc_freeze else []
    if args.policy_delay_ms:
        p(f"\npolicy latency {args.policy_delay_ms:g} ms per /generate (default run: 0)")
    if what_if:
        p(f"\n*** WHAT-IF run, not the shipped configuration: {', '.join(what_if)} ***")
    p(f"\nidle event-loop lag (1 s, no load): p50 {results['idle']['p50']:.2f} ms, p99 {results['idle']['p99']:.2f} ms")
    if "cpu" in results:
        cpu = results["cpu"]
        p(f"\n[cpu] {args.sessions} sessions, lock-step rounds up to {args.context} tokens (non-streaming JSON)")
        p(
            f"{'context':>9} | {'ours CPU ms/turn':>16} | {'naive CPU ms/turn':>17} | {'naive/ours':>10} | "
            f"{'loop-thread ms/turn ours / naive':>32}"
        )
        sizes = [s for s in args.sizes if s <= args.context]
        for size in sizes:
            ours, ours_prompt = cpu_at(cpu["ours"]["rounds"], size)
            naive, naive_prompt = cpu_at(cpu["naive"]["rounds"], size)
            ours_loop, _ = cpu_at(cpu["ours"]["rounds"], size, "loop_ms_per_turn")
            naive_loop, _ = cpu_at(cpu["naive"]["rounds"], size, "loop_ms_per_turn")
            label = f"~{ours_prompt / 1000:.1f}k"
            p(
                f"{label:>9} | {ours:16.1f} | {naive:17.1f} | {ratio(naive, ours):>10} | {ours_loop:14.1f} / "
                f"{naive_loop:<15.1f}"
            )
        o, n = cpu["ours"], cpu["naive"]
        p(
            f"{'all turns':>9} | {o['cpu_ms_per_turn_all']:16.1f} | {n['cpu_ms_per_turn_all']:17.1f} | "
            f"{ratio(n['cpu_ms_per_turn_all'], o['cpu_ms_per_turn_all']):>10} |"
        )
        p(
            f"lag during [cpu] rounds: ours p50/p99 {o['lag']['p50']:.1f}/{o['lag']['p99']:.1f} ms, naive "
            f"{n['lag']['p50']:.1f}/{n['lag']['p99']:.1f} ms"
        )
        for v in VARIANTS:
            p(
                f"  {v:5}: {cpu[v]['turns']} turns, max prompt {cpu[v]['max_prompt']} tokens; "
                f"{ledger_note(cpu[v]['ledger'], args.sessions)}"
            )
            p(f"         {gc_note(cpu[v]['gc'])}")
    if "lag" in results:
        lag = results["lag"]
        p(
            f"\n[lag] {args.lag_sessions} agent loops, no think time, each running back-to-back conversations up to "
            f"{args.lag_context} tokens;"
            f" metered {args.lag_seconds:g} s after {args.lag_warmup:g} s of load"
        )
        p(
            f"{'variant':>7} | {'turns':>5} | {'turns/s':>7} | {'mean prompt':>11} | {'CPU ms/turn':>11} | "
            f"{'loop ms/turn':>12} | {'lag p50':>7} | {'lag p99':>7} | {'lag max':>7}"
        )
        for v in VARIANTS:
            w = lag[v]["window"]
            p(
                f"{v:>7} | {w['turns']:5d} | {w['turns_per_s']:7.1f} | {w['mean_prompt']:11.0f} | "
                f"{w['cpu_ms_per_turn']:11.1f} | "
                f"{w['loop_ms_per_turn']:12.1f} | {w['lag']['p50']:7.1f} | {w['lag']['p99']:7.1f} | "
                f"{w['lag']['max']:7.1f}"
            )
        o, n = lag["ours"]["window"], lag["naive"]["window"]
        p(
            f"naive/ours: CPU/turn {ratio(n['cpu_ms_per_turn'], o['cpu_ms_per_turn'])}, lag p99 "
            f"{ratio(n['lag']['p99'], o['lag']['p99'])}"
        )
        for v in VARIANTS:
            w = lag[v]["window"]
            p(
                f"  {v:5}: {lag[v]['conversations']} conversations, {lag[v]['turns']} turns in {lag[v]['wall_s']:.1f} "
                f"s, max prompt {lag[v]['max_prompt']}; {ledger_note(lag[v]['ledger'], lag[v]['conversations'])}"
            )
            p(f"         adapter CPU {100 * w['adapter_cpu_util']:.0f}% of one core in the window; {gc_note(w['gc'])}")
    p(
        "\ntargets (stated by the project; reported, not enforced)"
        + (" -- WHAT-IF run, not the shipped configuration:" if what_if else ":")
    )
    if "cpu" in results and args.context in args.sizes:
        ours, _ = cpu_at(results["cpu"]["ours"]["rounds"], args.context)
        naive, _ = cpu_at(results["cpu"]["naive"]["rounds"], args.context)
        verdict = "MET" if ours <= naive / 3 else "NOT MET"
        p(f"  per-turn CPU at {args.context} tokens: ours/naive = {ours / naive:.3f} (target <= 0.333): {verdict}")
    if "lag" in results and results["lag"]["ours"]["window"]:
        p99 = results["lag"]["ours"]["window"]["lag"]["p99"]
        verdict = "MET" if p99 < 20.0 else "NOT MET"
        p(f"  loop lag p99 at {args.lag_sessions} sessions: ours {p99:.1f} ms (target < 20 ms): {verdict}")
    p(
        f"  other CPU in the run: clients {results['client_cpu_s']:.1f} s, policy server {results['policy_cpu_s']:.1f} "
        f"s, adapter {results['adapter_cpu_s']:.1f} s (total wall {results['wall_s']:.0f} s)"
    )


async def run_all(args: argparse.Namespace, adapter_url: str, control_url: str, policy_url: str) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as http:
        bench = Bench(http, adapter_url, control_url, policy_url, load_corpus(), args.seed, args.turns or 10_000)
        started = time.perf_counter()
        client0 = time.process_time()
        adapter0, policy0 = await bench.stats()
        results: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if k != "role"}}
        print("warming up ...", flush=True)
        await warm_up(bench)
        results["idle"] = await idle_lag(bench)
        if "cpu" in args.scenarios:
            results["cpu"] = {}
            for variant in VARIANTS:
                print(f"[cpu] {variant}: {args.sessions} sessions to {args.context} tokens ...", flush=True)
                results["cpu"][variant] = await scenario_cpu(bench, variant, args.sessions, args.context)
        if "lag" in args.scenarios:
            results["lag"] = {}
            for variant in VARIANTS:
                print(
                    f"[lag] {variant}: {args.lag_sessions} agent loops, conversations up to {args.lag_context} tokens, "
                    f"{args.lag_warmup:g} s + {args.lag_seconds:g} s ...",
                    flush=True,
                )
                profile = str(Path(args.profile).resolve() / f"lag-{variant}.prof") if args.profile else None
                results["lag"][variant] = await scenario_lag(
                    bench, variant, args.lag_sessions, args.lag_context, args.lag_warmup, args.lag_seconds, profile
                )
        adapter1, policy1 = await bench.stats()
        results["client_cpu_s"] = time.process_time() - client0
        results["adapter_cpu_s"] = adapter1 - adapter0
        results["policy_cpu_s"] = policy1 - policy0
        results["wall_s"] = time.perf_counter() - started
        return results


def spawn(role: str, args: argparse.Namespace) -> subprocess.Popen:
    """This module in ``role``, with the options that role reads."""
    role_args = ["--role", role, "--tokenizer", str(args.tokenizer), "--cpu-threads", str(args.cpu_threads or 0)]
    if args.what_if_switch_interval:
        role_args += ["--what-if-switch-interval", str(args.what_if_switch_interval)]
    if args.what_if_gc_freeze:
        role_args += ["--what-if-gc-freeze"]
    if args.policy_delay_ms:
        role_args += ["--policy-delay-ms", str(args.policy_delay_ms)]
    return start_role("bench.adapter_bench", role_args)


def orchestrate(args: argparse.Namespace) -> int:
    from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer

    args.tokenizer = args.tokenizer or ensure_qwen_tokenizer()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    procs: list[subprocess.Popen] = []
    try:
        policy = spawn("policy", args)
        procs.append(policy)
        adapter = spawn("adapter", args)
        procs.append(adapter)
        (policy_url,) = read_ready(policy, "policy")
        adapter_url, control_url = read_ready(adapter, "adapter")
        print(f"policy {policy_url}  adapter {adapter_url} (pid {adapter.pid})  control {control_url}", flush=True)
        results = asyncio.run(run_all(args, adapter_url, control_url, policy_url))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for proc in reversed(procs):
            stop_process(proc)
    report(args, results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
        print(f"raw results: {args.json}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--role", choices=["orchestrate", "adapter", "policy"], default="orchestrate", help=argparse.SUPPRESS
    )
    parser.add_argument("--sessions", type=int, default=8, help="[cpu] concurrent sessions (default 8)")
    parser.add_argument("--context", type=int, default=32768, help="[cpu] target context in tokens (default 32768)")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[8192, 16384, 32768],
        help="[cpu] context sizes to report per-turn CPU at",
    )
    parser.add_argument("--lag-sessions", type=int, default=64, help="[lag] concurrent sessions (default 64)")
    parser.add_argument("--lag-context", type=int, default=16384, help="[lag] target context in tokens (default 16384)")
    parser.add_argument(
        "--lag-warmup", type=float, default=3.0, help="[lag] seconds of load before the meter starts (default 3)"
    )
    parser.add_argument("--lag-seconds", type=float, default=10.0, help="[lag] seconds metered (default 10)")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="cProfile the adapter during the [lag] windows (every thread on Python 3.12+), .prof files into this "
        "directory (inflates the numbers)",
    )
    parser.add_argument(
        "--turns", type=int, default=0, help="cap on turns per session (default: until the context target)"
    )
    parser.add_argument(
        "--scenarios", type=lambda s: s.split(","), default=["cpu", "lag"], help="comma list of cpu,lag"
    )
    parser.add_argument(
        "--cpu-threads",
        type=int,
        default=0,
        help="adapter CPU pool threads (0: the AdapterServer default, max(2, cpu_count - 1))",
    )
    parser.add_argument(
        "--policy-delay-ms",
        type=float,
        default=0.0,
        help="sensitivity: the policy server waits this long per /generate (default 0: zero latency)",
    )
    parser.add_argument(
        "--what-if-switch-interval",
        type=float,
        default=0.0,
        help="diagnostic: sys.setswitchinterval(S) in the adapter process (not shipped)",
    )
    parser.add_argument(
        "--what-if-gc-freeze", action="store_true", help="diagnostic: gc.freeze() after adapter start-up (not shipped)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write raw results here")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    if args.role == "policy":
        asyncio.run(policy_main(args))
        return 0
    if args.role == "adapter":
        asyncio.run(adapter_main(args))
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
