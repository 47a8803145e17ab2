"""A scripted policy server that speaks SGLang's native ``/generate`` contract offline.

Tests and the demo point the worker at it instead of SGLang: it answers with
real token ids from the project's tokenizer, so the whole coding-agent loop
(render → generate → parse → record) runs without a GPU.

Endpoints:

* ``POST /generate`` (non-streaming only). Request: ``input_ids``,
  ``sampling_params.max_new_tokens`` (default 128), ``return_logprob``,
  ``rid``; header ``X-SMG-Routing-Key`` picks the policy override. Response:
  ``text``, ``output_ids`` and ``meta_info`` (``id``, ``finish_reason``,
  ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``e2e_latency``
  and, when ``return_logprob``, ``output_token_logprobs`` as
  ``[[logprob, token_id, None], ...]``). A bad request is HTTP 400
  ``{"error": "<field>: <why>", "field": "<field>"}``.
* ``POST /abort_request {"rid": ...}``: an in-flight request returns with
  ``finish_reason {"type": "abort"}`` and no output; an unknown rid is a no-op.
* ``GET /health``, ``GET /health_generate``, ``GET /get_model_info``.
* ``POST /scripted/policy {"routing_key": ..., "policy": ...}`` (a null
  routing key sets the server default) and ``GET /scripted/records[?routing_key=...]``.

Invariants:

* A policy turns the decoded prompt into completion text; the server encodes
  it and appends the end-of-turn token. A normal answer ends with
  ``finish_reason {"type": "stop", "matched": <end-of-turn id>}`` and that id
  is the last of ``output_ids``. If the completion plus end token is longer
  than ``max_new_tokens``, it is cut to exactly ``max_new_tokens`` ids and
  ends with ``{"type": "length", "length": max_new_tokens}``.
* ``text == decode(output_ids)`` with special tokens kept (in-vocabulary ids
  only, which matters for ``garbage``). The end-of-turn id is never trimmed,
  whatever ``no_stop_trim`` says; other sampling parameters are ignored.
* Log-probs are deterministic in ``(rid, position)``, in ``(-4, 0]``.
* Every answered ``/generate`` is recorded as a :class:`SampledRecord`, in
  answer order, with exactly the ids and log-probs returned: aborted requests
  (no output, ``abort``) and ``error``-mode requests (no output,
  ``{"type": "error"}``, HTTP 500) included. Rejected (400) requests are not.

Policies (``POLICIES``): ``oracle`` (Read the problem statement, apply the
known patch with Bash, then finish), ``noop`` (finish at once), ``malformed``
(an ill-formed tool call), ``length`` (always hits ``max_new_tokens``),
``error`` (HTTP 500), ``slow`` (``oracle`` after ``delay_s``, abortable) and
``garbage`` (negative and out-of-vocabulary ids). For drift → repair
episodes (``scripted_policy.drift_roles``): ``drift`` (the seeded baseline's
spec as JSON), ``repair`` (the oracle diff for the prompt's corpus task) and
``self_play`` (whichever role the prompt asks for).

CLI: ``python -m scripted_policy.server --port 30000 --policy oracle
--oracle-tasks TASKS.json --tokenizer DIR`` serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import posixpath
import random
import re
import shlex
import signal
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel, TypeAdapter

from drift_repair.corpus import load_corpus
from policy.prompt_renderer import PromptRenderer
from policy.tokenizer_cache import DEFAULT_TOKENIZER_DIR, ensure_qwen_tokenizer
from scripted_policy.drift_roles import RepairCompletion, SelfPlayCompletion, drift_completion

ROUTING_KEY_HEADER = "X-SMG-Routing-Key"
DEFAULT_MAX_NEW_TOKENS = 128
POLICIES = ("oracle", "noop", "malformed", "length", "error", "slow", "garbage", "drift", "repair", "self_play")
ASSISTANT_TURN = "<|im_start|>assistant"
PROBLEM_STATEMENT_FILE = "PROBLEM_STATEMENT.md"
PATCH_DELIMITER = "ORACLE_PATCH"

_CWD_LINE = re.compile(r"Primary working directory: *([^\n<]*[^\s<])")
_READ_LINE_NUMBER = re.compile(r"(?m)^ *\d+(?:\t|→)")


class OracleTask(BaseModel):
    """A task the oracle can solve: ``match`` occurs in its problem statement, ``patch`` fixes it."""

    match: str
    patch: str


class SampledRecord(BaseModel):
    """One answered ``/generate`` call, exactly as returned to the client."""

    rid: str
    routing_key: str | None
    input_ids: list[int]
    output_ids: list[int]
    output_logprobs: list[float]
    finish_reason: dict[str, Any]
    policy: str


def load_oracle_tasks(path: str | Path) -> list[OracleTask]:
    """Read a JSON list of ``{"match": ..., "patch": ...}`` objects."""
    return TypeAdapter(list[OracleTask]).validate_json(Path(path).read_bytes())


def final_answer(reasoning: str, text: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{text}"


def tool_call(reasoning: str, text: str, name: str, arguments: dict[str, str]) -> str:
    """A completion calling one tool, in Qwen3-coder XML exactly as the chat template renders it."""
    parameters = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
    return f"{final_answer(reasoning, text)}\n\n<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"


def noop_completion(prompt: str, max_new_tokens: int) -> str:
    return final_answer("There is nothing for me to do.", "I will not change anything.")


def malformed_completion(prompt: str, max_new_tokens: int) -> str:
    """A tool call whose body is neither the XML-function form nor JSON, and is never closed."""
    broken_call = '<tool_call>\n<function=Bash>\n{"command": "ls -la"\n'
    return f"{final_answer('I will list the files.', 'Listing the files.')}\n\n{broken_call}"


def length_completion(prompt: str, max_new_tokens: int) -> str:
    """At least ``max_new_tokens + 1`` tokens, so the end token never fits."""
    return "<think>\n" + "Still thinking. " * max_new_tokens


def completed_assistant_turns(prompt: str) -> int:
    """Assistant turns before the one being generated (the prompt ends with an open one)."""
    return max(prompt.count(ASSISTANT_TURN) - 1, 0)


def working_directory(prompt: str) -> str | None:
    found = _CWD_LINE.search(prompt)
    return found.group(1).strip() if found else None


def heredoc(patch: str) -> tuple[str, str]:
    """The patch with its trailing newline, and a delimiter that occurs nowhere in it."""
    body = patch if patch.endswith("\n") else patch + "\n"
    delimiter = PATCH_DELIMITER
    while delimiter in body:
        delimiter += "_"
    return body, delimiter


class OraclePolicy:
    """Reads the problem statement, applies the matching task's patch, then finishes.

    The turn is the number of earlier assistant turns in the prompt. A task
    matches when its ``match`` string occurs in the prompt, either as is or
    with the line numbers of Claude Code's ``Read`` output removed; the
    longest matching ``match`` wins.
    """

    def __init__(self, tasks: Sequence[OracleTask]):
        self.tasks = list(tasks)

    def __call__(self, prompt: str, max_new_tokens: int) -> str:
        turn = completed_assistant_turns(prompt)
        cwd = working_directory(prompt)
        if turn == 0:
            return self._read_problem_statement(cwd)
        if turn == 1:
            return self._apply_patch(prompt, cwd)
        return final_answer("The patch applied cleanly.", "The fix is applied.")

    def _read_problem_statement(self, cwd: str | None) -> str:
        reasoning = "I should read the problem statement first."
        text = "Reading the problem statement."
        if cwd is None:
            return tool_call(reasoning, text, "Bash", {"command": f"cat {PROBLEM_STATEMENT_FILE}"})
        return tool_call(reasoning, text, "Read", {"file_path": posixpath.join(cwd, PROBLEM_STATEMENT_FILE)})

    def _apply_patch(self, prompt: str, cwd: str | None) -> str:
        task = self.matching_task(prompt)
        if task is None:
            return final_answer("I do not recognise this problem.", "No known task matches this problem statement.")
        body, delimiter = heredoc(task.patch)
        apply = f"git apply --whitespace=nowarn <<'{delimiter}'\n{body}{delimiter}"
        command = f"cd {shlex.quote(cwd)} && {apply}" if cwd else apply
        return tool_call("I know the fix for this problem.", "Applying the fix.", "Bash", {"command": command})

    def matching_task(self, prompt: str) -> OracleTask | None:
        plain = _READ_LINE_NUMBER.sub("", prompt)
        matching = [task for task in self.tasks if task.match in prompt or task.match in plain]
        return max(matching, key=lambda task: len(task.match), default=None)


def token_logprob(rid: str, position: int) -> float:
    return -4.0 * random.Random(f"{rid}:{position}").random()


def finish(ids: list[int], max_new_tokens: int, end_of_turn_id: int) -> tuple[list[int], dict[str, Any]]:
    if len(ids) > max_new_tokens:
        return ids[:max_new_tokens], {"type": "length", "length": max_new_tokens}
    return ids, {"type": "stop", "matched": end_of_turn_id}


class BadRequest(Exception):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field


@dataclass(frozen=True)
class GenerateRequest:
    input_ids: list[int]
    max_new_tokens: int
    rid: str
    return_logprob: bool


def parse_generate_request(body: Any, vocab_size: int) -> GenerateRequest:
    if not isinstance(body, dict):
        raise BadRequest("body", "must be a JSON object")
    if body.get("stream"):
        raise BadRequest("stream", "streaming is not supported, send stream=false")
    input_ids = body.get("input_ids")
    if not isinstance(input_ids, list) or not input_ids:
        raise BadRequest("input_ids", "must be a non-empty list of token ids")
    for index, token in enumerate(input_ids):
        if type(token) is not int or not 0 <= token < vocab_size:
            raise BadRequest("input_ids", f"input_ids[{index}] = {token!r} is not a token id in [0, {vocab_size})")
    sampling = body.get("sampling_params") or {}
    if not isinstance(sampling, dict):
        raise BadRequest("sampling_params", "must be an object")
    max_new_tokens = sampling.get("max_new_tokens")
    if max_new_tokens is None:
        max_new_tokens = DEFAULT_MAX_NEW_TOKENS
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise BadRequest("sampling_params.max_new_tokens", "must be a positive integer")
    rid = body.get("rid") or uuid.uuid4().hex
    if not isinstance(rid, str):
        raise BadRequest("rid", "must be a string")
    return GenerateRequest(input_ids, max_new_tokens, rid, bool(body.get("return_logprob", False)))


@dataclass(frozen=True)
class Completion:
    """What one ``/generate`` call produced; ``text`` decodes the in-vocabulary ``output_ids``."""

    output_ids: list[int]
    logprobs: list[float]
    finish_reason: dict[str, Any]
    text: str = ""

    def response(self, generate: GenerateRequest, latency: float) -> dict[str, Any]:
        meta_info: dict[str, Any] = {
            "id": generate.rid,
            "finish_reason": self.finish_reason,
            "prompt_tokens": len(generate.input_ids),
            "completion_tokens": len(self.output_ids),
            "cached_tokens": 0,
            "e2e_latency": latency,
        }
        if generate.return_logprob:
            meta_info["output_token_logprobs"] = [[logprob, token, None] for logprob, token in zip(self.logprobs, self.output_ids, strict=False)]
        return {"text": self.text, "output_ids": self.output_ids, "meta_info": meta_info}


ABORTED = Completion([], [], {"type": "abort", "message": "aborted by /abort_request"})
ERRORED = Completion([], [], {"type": "error", "message": "scripted policy error"})


async def wait_unless_set(event: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``event`` is set meanwhile."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        pass


def bad_request(error: BadRequest) -> web.Response:
    return web.json_response({"error": str(error), "field": error.field}, status=400)


async def json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest("body", f"not valid JSON ({exc})") from exc


class ScriptedPolicyServer:
    """See the module docstring for the HTTP contract."""

    def __init__(
        self,
        renderer: PromptRenderer,
        default_policy: str = "oracle",
        oracle_tasks: Sequence[OracleTask] = (),
        delay_s: float = 2.0,
    ):
        self.renderer = renderer
        self.default_policy = self._known(default_policy)
        self.delay_s = delay_s
        self.records: list[SampledRecord] = []
        self._overrides: dict[str, str] = {}
        self._inflight: dict[str, asyncio.Event] = {}
        self._runner: web.AppRunner | None = None
        oracle = OraclePolicy(oracle_tasks)
        self._completions: dict[str, Callable[[str, int], str]] = {
            "oracle": oracle,
            "slow": oracle,
            "noop": noop_completion,
            "malformed": malformed_completion,
            "length": length_completion,
            "drift": drift_completion,
            "repair": RepairCompletion(load_corpus),
            "self_play": SelfPlayCompletion(load_corpus),
        }

    @staticmethod
    def _known(policy: str) -> str:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        return policy

    def set_policy(self, routing_key: str | None, policy: str) -> None:
        """Use ``policy`` for requests carrying ``routing_key``; ``None`` sets the server default."""
        if routing_key is None:
            self.default_policy = self._known(policy)
        else:
            self._overrides[routing_key] = self._known(policy)

    def policy_for(self, routing_key: str | None) -> str:
        return self._overrides.get(routing_key, self.default_policy) if routing_key else self.default_policy

    def records_for(self, routing_key: str | None) -> list[SampledRecord]:
        return [record for record in self.records if record.routing_key == routing_key]

    @property
    def in_flight(self) -> list[str]:
        """The request ids of the ``/generate`` calls being answered right now (an abort can still reach them)."""
        return list(self._inflight)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/generate", self._generate)
        app.router.add_post("/abort_request", self._abort_request)
        app.router.add_get("/health", self._health)
        app.router.add_get("/health_generate", self._health)
        app.router.add_get("/get_model_info", self._model_info)
        app.router.add_post("/scripted/policy", self._set_policy)
        app.router.add_get("/scripted/records", self._records)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 picks a free port) and return the base URL."""
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        return f"http://{bound_host}:{bound_port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _generate(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        routing_key = request.headers.get(ROUTING_KEY_HEADER)
        try:
            generate = parse_generate_request(await json_body(request), self.renderer.vocab_size)
            if generate.rid in self._inflight:
                raise BadRequest("rid", f"{generate.rid!r} is already in flight")
        except BadRequest as error:
            return bad_request(error)
        policy = self.policy_for(routing_key)
        aborted = self._inflight[generate.rid] = asyncio.Event()
        try:
            completion = await self._answer(policy, generate, aborted)
        finally:
            del self._inflight[generate.rid]
        self._record(generate, routing_key, policy, completion)
        if completion is ERRORED:
            return web.json_response({"error": "scripted policy error (policy 'error')"}, status=500)
        return web.json_response(completion.response(generate, time.monotonic() - started))

    async def _answer(self, policy: str, generate: GenerateRequest, aborted: asyncio.Event) -> Completion:
        if policy == "error":
            return ERRORED
        if policy == "slow":
            await wait_unless_set(aborted, self.delay_s)
        if aborted.is_set():
            return ABORTED
        completion = await asyncio.to_thread(self._complete, policy, generate)
        return ABORTED if aborted.is_set() else completion

    def _complete(self, policy: str, generate: GenerateRequest) -> Completion:
        """Run in a worker thread: decode the prompt, script the answer, encode it, score it."""
        end_id = self.renderer.end_of_turn_id
        scripted_ids = self._scripted_ids(policy, generate) + [end_id]
        output_ids, finish_reason = finish(scripted_ids, generate.max_new_tokens, end_id)
        logprobs = [token_logprob(generate.rid, position) for position in range(len(output_ids))]
        text = self.renderer.decode([token for token in output_ids if 0 <= token < self.renderer.vocab_size])
        return Completion(output_ids, logprobs, finish_reason, text)

    def _scripted_ids(self, policy: str, generate: GenerateRequest) -> list[int]:
        if policy == "garbage":
            return [-1, self.renderer.vocab_size + 7]
        prompt = self.renderer.decode(generate.input_ids)
        return self.renderer.encode(self._completions[policy](prompt, generate.max_new_tokens))

    def _record(self, generate: GenerateRequest, routing_key: str | None, policy: str, completion: Completion) -> None:
        self.records.append(
            SampledRecord(
                rid=generate.rid,
                routing_key=routing_key,
                input_ids=generate.input_ids,
                output_ids=completion.output_ids,
                output_logprobs=completion.logprobs,
                finish_reason=completion.finish_reason,
                policy=policy,
            )
        )

    async def _abort_request(self, request: web.Request) -> web.Response:
        try:
            body = await json_body(request)
        except BadRequest as error:
            return bad_request(error)
        rid = body.get("rid") if isinstance(body, dict) else None
        if not isinstance(rid, str):
            return bad_request(BadRequest("rid", "must be a string"))
        if rid in self._inflight:
            self._inflight[rid].set()
        return web.json_response({"rid": rid})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": f"scripted-{self.default_policy}", "is_generation": True})

    async def _set_policy(self, request: web.Request) -> web.Response:
        try:
            body = await json_body(request)
            if not isinstance(body, dict):
                raise BadRequest("body", "must be a JSON object")
            routing_key, policy = body.get("routing_key"), body.get("policy")
            if routing_key is not None and not isinstance(routing_key, str):
                raise BadRequest("routing_key", "must be a string or null")
            if policy not in POLICIES:
                raise BadRequest("policy", f"must be one of {', '.join(POLICIES)}")
        except BadRequest as error:
            return bad_request(error)
        self.set_policy(routing_key, policy)
        return web.json_response({"routing_key": routing_key, "policy": policy})

    async def _records(self, request: web.Request) -> web.Response:
        routing_key = request.query.get("routing_key")
        records = self.records if routing_key is None else self.records_for(routing_key)
        return web.json_response([record.model_dump() for record in records])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scripted_policy.server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--policy", choices=POLICIES, default="oracle", help="the server-wide default policy")
    parser.add_argument("--oracle-tasks", type=Path, help="JSON list of {match, patch} objects")
    parser.add_argument("--tokenizer", type=Path, help=f"HF tokenizer directory (default: {DEFAULT_TOKENIZER_DIR})")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the 'slow' policy waits")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    tokenizer_dir = args.tokenizer or await asyncio.to_thread(ensure_qwen_tokenizer)
    renderer = await asyncio.to_thread(PromptRenderer, tokenizer_dir)
    tasks = load_oracle_tasks(args.oracle_tasks) if args.oracle_tasks else []
    server = ScriptedPolicyServer(renderer, args.policy, tasks, args.delay)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    url = await server.start(args.host, args.port)
    print(f"scripted policy server ({args.policy}, {len(tasks)} oracle tasks) at {url}", flush=True)
    try:
        await stopping.wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    asyncio.run(serve(parse_args()))
