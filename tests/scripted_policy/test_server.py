"""The scripted policy server: SGLang's /generate contract, real token ids, the oracle's three turns, fault modes."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator

import aiohttp
import pytest

from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.completions import PATCH_DELIMITER, OracleTask, heredoc, noop_completion
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ROUTING_KEY_HEADER, ScriptedPolicyServer, parse_args
from tests.argparse_refusals import refusal
from tests.scripted_policy.generate_requests import END_ID, STATEMENT, conversation, generate_body, prompt_ids

END = "<|im_end|>"
ORIGINAL = "def frobnicate(items):\n    return items[0]\n"
FIXED = "def frobnicate(items):\n    return items[:1]\n"
PATCH = """\
--- a/frob.py
+++ b/frob.py
@@ -1,2 +1,2 @@
 def frobnicate(items):
-    return items[0]
+    return items[:1]
"""


@pytest.fixture
async def server(renderer: PromptRenderer) -> AsyncIterator[ScriptedPolicyServer]:
    tasks = [
        OracleTask(match="frobnicator", patch="unrelated shorter match loses\n"),
        OracleTask(match=STATEMENT, patch=PATCH),  # spans lines: matched through Read's line numbers
    ]
    scripted = ScriptedPolicyServer(renderer, oracle_tasks=tasks, delay_s=0.2)
    scripted.url = await scripted.start()
    yield scripted
    await scripted.stop()


async def generate(
    http: aiohttp.ClientSession,
    server: ScriptedPolicyServer,
    body: dict,
    routing_key: str | None = "sess",
    status: int = 200,
) -> dict:
    headers = {ROUTING_KEY_HEADER: routing_key} if routing_key else {}
    async with http.post(f"{server.url}/generate", json=body, headers=headers) as response:
        assert response.status == status, await response.text()
        return await response.json()


def parameter(completion: str, name: str) -> str:
    tail = rf"<parameter={name}>\n(.*)\n</parameter>\n</function>\n</tool_call>{END}$"
    found = re.search(tail, completion, re.DOTALL)
    assert found, completion
    return found.group(1)


async def test_response_shape_and_real_token_ids(server, http, renderer):
    server.set_policy(None, "noop")
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    reply = await generate(http, server, generate_body(input_ids, "rid-shape"))

    expected = noop_completion("", 0) + END
    meta = reply["meta_info"]
    assert renderer.decode(reply["output_ids"]) == expected == reply["text"]
    assert reply["output_ids"] == renderer.encode(expected) and reply["output_ids"][-1] == END_ID
    assert meta["id"] == "rid-shape"
    assert meta["finish_reason"] == {"type": "stop", "matched": END_ID}
    assert meta["prompt_tokens"] == len(input_ids)
    assert meta["completion_tokens"] == len(reply["output_ids"])
    assert meta["cached_tokens"] == 0 and meta["e2e_latency"] >= 0 and meta["num_retractions"] == 0
    assert meta["weight_version"] == "default"
    assert meta["weight_versions"] == [{"version": "default", "start": 0, "end": len(reply["output_ids"])}]
    assert [token for _, token, _ in meta["output_token_logprobs"]] == reply["output_ids"]
    assert all(text is None for _, _, text in meta["output_token_logprobs"])


async def test_records_equal_what_was_returned(server, http, renderer):
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    reply = await generate(http, server, generate_body(input_ids, "rid-rec"), routing_key="sess-rec")
    await generate(http, server, generate_body(input_ids, "rid-other"), routing_key="sess-other")

    [record] = server.records_for("sess-rec")
    assert record.rid == "rid-rec" and record.policy == "oracle"
    assert record.input_ids == input_ids
    assert record.output_ids == reply["output_ids"]
    assert record.output_logprobs == [lp for lp, _, _ in reply["meta_info"]["output_token_logprobs"]]
    assert record.finish_reason == reply["meta_info"]["finish_reason"]
    assert record.output_versions == ["default"] * len(reply["output_ids"])
    async with http.get(f"{server.url}/scripted/records", params={"routing_key": "sess-rec"}) as response:
        assert await response.json() == [record.model_dump()]
    async with http.get(f"{server.url}/scripted/records") as response:
        assert [r["rid"] for r in await response.json()] == ["rid-rec", "rid-other"]


async def test_logprobs_deterministic_and_never_positive(server, http, renderer):
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    first = await generate(http, server, generate_body(input_ids, "rid-lp"))
    again = await generate(http, server, generate_body(input_ids, "rid-lp"))
    other = await generate(http, server, generate_body(input_ids, "rid-lp-2"))

    logprobs = [lp for lp, _, _ in first["meta_info"]["output_token_logprobs"]]
    assert logprobs == [lp for lp, _, _ in again["meta_info"]["output_token_logprobs"]]
    assert logprobs != [lp for lp, _, _ in other["meta_info"]["output_token_logprobs"]]
    assert all(-4.0 <= lp <= 0.0 for lp in logprobs) and len(set(logprobs)) > 1


async def test_logprobs_omitted_without_return_logprob(server, http, renderer):
    body = generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "rid-nolp") | {"return_logprob": False}
    reply = await generate(http, server, body)
    assert "output_token_logprobs" not in reply["meta_info"]


async def test_completion_longer_than_budget_is_cut_with_length(server, http, renderer):
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    full = await generate(http, server, generate_body(input_ids, "rid-full"))
    budget = len(full["output_ids"]) - 1
    cut = await generate(http, server, generate_body(input_ids, "rid-cut", max_new_tokens=budget))

    assert cut["output_ids"] == full["output_ids"][:budget] and END_ID not in cut["output_ids"]
    assert cut["meta_info"]["finish_reason"] == {"type": "length", "length": budget}
    exact = await generate(http, server, generate_body(input_ids, "rid-exact", max_new_tokens=budget + 1))
    assert exact["meta_info"]["finish_reason"]["type"] == "stop"


@pytest.mark.parametrize("max_new_tokens", [1, 50, 3000])
async def test_length_policy_always_hits_the_budget(server, http, renderer, max_new_tokens):
    server.set_policy("sess-len", "length")
    body = generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "rid-len", max_new_tokens)
    reply = await generate(http, server, body, routing_key="sess-len")
    assert len(reply["output_ids"]) == max_new_tokens
    assert reply["meta_info"]["finish_reason"] == {"type": "length", "length": max_new_tokens}


async def test_oracle_turn0_reads_the_problem_statement(server, http, renderer):
    reply = await generate(http, server, generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "t0"))
    assert reply["text"].startswith("<think>\n")
    assert "<function=Read>" in reply["text"]
    assert parameter(reply["text"], "file_path") == "/tmp/x/PROBLEM_STATEMENT.md"


async def test_oracle_turn0_without_cwd_falls_back_to_bash(server, http, renderer):
    reply = await generate(http, server, generate_body(prompt_ids(renderer, conversation(None, 0)), "t0-nocwd"))
    assert parameter(reply["text"], "command") == "cat PROBLEM_STATEMENT.md"


async def test_oracle_turn1_command_applies_the_patch(server, http, renderer, tmp_path):
    repo = tmp_path / "repo with space"
    repo.mkdir()
    (repo / "frob.py").write_text(ORIGINAL)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    reply = await generate(http, server, generate_body(prompt_ids(renderer, conversation(str(repo), 1)), "t1"))

    assert reply["meta_info"]["finish_reason"]["type"] == "stop"
    command = parameter(reply["text"], "command")
    assert command.startswith(f"cd '{repo}' && git apply --whitespace=nowarn <<'{PATCH_DELIMITER}'\n")
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True, capture_output=True)
    assert (repo / "frob.py").read_text() == FIXED


async def test_oracle_turn1_unknown_task_ends_with_a_message(server, http, renderer):
    messages = conversation("/tmp/x", 1)
    messages[3] = {"role": "tool", "content": "     1\tSomething entirely different is broken."}
    reply = await generate(http, server, generate_body(prompt_ids(renderer, messages), "t1-unknown"))
    assert "<tool_call>" not in reply["text"]
    assert reply["text"].endswith(f"No known task matches this problem statement.{END}")


async def test_oracle_turn2_finishes(server, http, renderer):
    reply = await generate(http, server, generate_body(prompt_ids(renderer, conversation("/tmp/x", 2)), "t2"))
    assert "<tool_call>" not in reply["text"]
    assert reply["text"].endswith(f"The fix is applied.{END}")


def test_heredoc_keeps_trailing_newline_and_avoids_collisions():
    body, delimiter = heredoc("line\n" + PATCH_DELIMITER)
    assert body == f"line\n{PATCH_DELIMITER}\n"
    assert delimiter not in body


async def test_policy_override_per_routing_key(server, http, renderer):
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    async with http.post(f"{server.url}/scripted/policy", json={"routing_key": "sess-noop", "policy": "noop"}) as r:
        assert r.status == 200
    async with http.post(f"{server.url}/scripted/policy", json={"routing_key": "x", "policy": "nope"}) as r:
        assert r.status == 400 and (await r.json())["field"] == "policy"

    overridden = await generate(http, server, generate_body(input_ids, "o1"), routing_key="sess-noop")
    default = await generate(http, server, generate_body(input_ids, "o2"), routing_key="sess-default")
    anonymous = await generate(http, server, generate_body(input_ids, "o3"), routing_key=None)
    assert overridden["text"] == noop_completion("", 0) + END
    assert "<function=Read>" in default["text"] and "<function=Read>" in anonymous["text"]
    assert [r.policy for r in server.records] == ["noop", "oracle", "oracle"]
    assert server.records_for(None)[0].rid == "o3"
    with pytest.raises(ValueError):
        server.set_policy("sess", "nope")


async def test_model_info_and_health(server, http):
    async with http.get(f"{server.url}/get_model_info") as response:
        assert (await response.json())["model_path"] == "scripted-oracle"
    for path in ("/health", "/health_generate"):
        async with http.get(f"{server.url}{path}") as response:
            assert response.status == 200


async def test_slow_answers_like_oracle_after_the_delay(server, http, renderer):
    server.set_policy("sess-slow", "slow")
    body = generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "slow-ok")
    reply = await generate(http, server, body, routing_key="sess-slow")
    assert reply["meta_info"]["e2e_latency"] >= 0.2
    assert "<function=Read>" in reply["text"]
    assert server.records[-1].policy == "slow"


async def test_abort_of_a_slow_request_returns_what_it_sampled(server, http, renderer):
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    full = await generate(http, server, generate_body(input_ids, "fast"), routing_key="sess-fast")
    server.delay_s = 3600.0
    server.set_policy("sess-slow", "slow")
    pending = asyncio.create_task(
        generate(http, server, generate_body(input_ids, "slow-abort"), routing_key="sess-slow")
    )
    while not any(g.rid == "slow-abort" and g.output_ids for g in server.control.live):
        await asyncio.sleep(0.01)
    async with http.post(f"{server.url}/abort_request", json={"rid": "slow-abort"}) as response:
        assert response.status == 200 and await response.read() == b""
    async with http.post(f"{server.url}/abort_request", json={"rid": "never-seen"}) as response:
        assert response.status == 200

    reply = await asyncio.wait_for(pending, 60)
    assert reply["output_ids"] == full["output_ids"][:1] and reply["text"] == renderer.decode(full["output_ids"][:1])
    assert reply["meta_info"]["finish_reason"] == {
        "type": "abort",
        "message": "Aborted",
        "status_code": None,
        "err_type": None,
    }
    [record] = server.records_for("sess-slow")
    assert record.finish_reason["type"] == "abort" and record.output_ids == reply["output_ids"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sampling_params": {"max_new_tokens": 8}}, "input_ids"),
        ({"input_ids": []}, "input_ids"),
        ({"input_ids": [1, "2", 3]}, "input_ids"),
        ({"input_ids": [1, 2.0]}, "input_ids"),
        ({"input_ids": [1, True]}, "input_ids"),
        ({"input_ids": [1, 248077]}, "input_ids"),
        ({"input_ids": [-1]}, "input_ids"),
        ({"input_ids": [1], "stream": True}, "stream"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": 0}}, "sampling_params.max_new_tokens"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": "8"}}, "sampling_params.max_new_tokens"),
        ({"input_ids": [1], "sampling_params": [8]}, "sampling_params"),
        ({"input_ids": [1], "rid": 7}, "rid"),
        ([1, 2, 3], "body"),
    ],
)
async def test_bad_requests_are_400_naming_the_field(server, http, body, field):
    async with http.post(f"{server.url}/generate", json=body) as response:
        assert response.status == 400
        error = await response.json()
    assert error["field"] == field and field in error["error"]
    assert server.records == []


async def test_non_json_body_is_400(server, http):
    async with http.post(f"{server.url}/generate", data=b"{not json") as response:
        assert response.status == 400
        assert (await response.json())["field"] == "body"


async def test_error_policy_is_500_and_recorded(server, http, renderer):
    server.set_policy("sess-err", "error")
    body = generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "err")
    reply = await generate(http, server, body, routing_key="sess-err", status=500)
    assert "error" in reply
    [record] = server.records_for("sess-err")
    assert record.finish_reason["type"] == "error" and record.output_ids == []


async def test_malformed_policy_emits_an_unclosed_tool_call(server, http, renderer):
    server.set_policy("sess-bad", "malformed")
    body = generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "bad")
    reply = await generate(http, server, body, routing_key="sess-bad")
    assert "<tool_call>" in reply["text"] and "</tool_call>" not in reply["text"]
    assert "</function>" not in reply["text"] and "<parameter=" not in reply["text"]
    assert reply["meta_info"]["finish_reason"] == {"type": "stop", "matched": END_ID}


async def test_garbage_policy_returns_invalid_ids(server, http, renderer):
    server.set_policy("sess-junk", "garbage")
    body = generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "junk")
    reply = await generate(http, server, body, routing_key="sess-junk")
    ids = reply["output_ids"]
    assert any(token < 0 for token in ids) and any(token >= renderer.vocab_size for token in ids)
    assert server.records_for("sess-junk")[0].output_ids == ids


def test_cli_serves_until_sigterm():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "durable_rollouts.scripted_policy.server",
        "--port",
        str(port),
        "--policy",
        "noop",
        "--oracle-tasks",
        str(EXAMPLE_DATASET),
        "--tokenizer",
        str(ensure_qwen_tokenizer()),
        "--lognormal-turn-delay",
        "0.01,1.0,3",
    ]
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        banner = process.stdout.readline()
        assert (
            f"http://127.0.0.1:{port}" in banner and f"{len(oracle_tasks_from(EXAMPLE_DATASET))} oracle tasks" in banner
        ), "the worker's dataset reader"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/get_model_info", timeout=5) as response:
            assert json.load(response)["model_path"] == "scripted-noop"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()


async def test_a_begun_answer_is_continued_and_a_wrong_one_refused(server, http, renderer):
    """Resubmitting prompt + the first tokens of the answer gets the rest; tokens that do not begin it get a 400."""
    server.set_policy("sess", "noop")
    ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    whole = await generate(http, server, generate_body(ids, "whole"))
    head = whole["output_ids"][:2]
    rest = await generate(http, server, generate_body(ids + head, "rest"))
    assert head + rest["output_ids"] == whole["output_ids"]
    wrong = await generate(http, server, generate_body(ids + [head[0] + 1], "wrong"), status=400)
    assert wrong["field"] == "input_ids"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--port", "70000"], "argument --port: 70000 is more than 65535"),
        (["--tokenizer", "no/such/tokenizer"], "argument --tokenizer: 'no/such/tokenizer': no such file or folder"),
        (
            ["--oracle-tasks", "no/such/rows.jsonl"],
            "argument --oracle-tasks: 'no/such/rows.jsonl': no such file or folder",
        ),
        (["--oracle-explore-turns", "-2"], "argument --oracle-explore-turns: -2 is less than 0"),
    ],
)
def test_a_bad_cli_flag_is_refused_by_its_name(argv, named, capsys):
    assert named in refusal(parse_args, argv, capsys)
