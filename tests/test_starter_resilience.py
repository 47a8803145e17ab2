"""The starter survives bad rows and bad rollouts: real dev server, in-process worker, Docker, Claude Code, scripted
policy.

Acceptance for issue 17 item 2: 100 malformed rows mixed with good ones in one
dataset file; every bad one is reported with its line and field (stderr and a
``failed`` results line), every good one completes as a group line (one
sample: the default K), the starter returns, and a re-run with the same run
id completes a damaged results file without writing anything twice. A rollout the server (or the client's payload cap)
refuses to start is a ``failed`` result while the others complete.
"""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio

from durable_rollouts.config.payload_store import MAX_ENV, payload_store_from_env
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.results_file import ResultSink, file_stem, record_with_segments
from durable_rollouts.trainer_client.rollout_runs import rollout_input, run_rollouts
from starter import parse_args, run_dataset
from tests.local_cluster import containers_of_runs, local_cluster

pytestmark = pytest.mark.integration
BUDGETS = RolloutBudgets(agent_budget_s=120, eval_timeout_s=120, guard_s=600)
EXAMPLES = [json.loads(line) for line in EXAMPLE_DATASET.read_text().splitlines()]
EMOJI_ID = "calc-Crème-brûlée-🦀-数据"


def with_metadata(index: int, **changes) -> dict:
    row = json.loads(json.dumps(EXAMPLES[0]))
    row["metadata"].update(changes)
    row["metadata"]["instance_id"] = changes.get("instance_id", f"bad-{index}")
    return row


def without(index: int, key: str) -> dict:
    row = with_metadata(index)
    del row["metadata"][key]
    return row


def bad_rows() -> list[tuple[bytes, str]]:
    """100 malformed lines, each with the field its report must name."""
    kinds = [
        lambda i: (b"{nope " + str(i).encode(), "row"),
        lambda i: (json.dumps([i, "a list"]).encode(), "row"),
        lambda i: (json.dumps(i).encode(), "row"),
        lambda i: (json.dumps({"prompt": "p", "metadata": f"not an object {i}"}).encode(), "metadata"),
        lambda i: (json.dumps(without(i, "image")).encode(), "metadata.image"),
        lambda i: (json.dumps(without(i, "workdir")).encode(), "metadata.workdir"),
        lambda i: (
            json.dumps(with_metadata(i)).replace(f'"bad-{i}"', f'"bad-{i}\\ud800"').encode(),
            "metadata.instance_id",
        ),
        lambda i: (json.dumps({**with_metadata(i), "prompt": "x"}).replace('"x"', '"\\udfff x"').encode(), "prompt"),
        lambda i: (json.dumps(with_metadata(i, instance_id="x" * 2017)).encode(), "metadata.instance_id"),
        lambda i: (json.dumps(with_metadata(i, instance_id=f"two\nlines-{i}")).encode(), "metadata.instance_id"),
        lambda i: (json.dumps(with_metadata(i, instance_id=[i])).encode(), "metadata.instance_id"),
        lambda i: (json.dumps(with_metadata(i, eval_cmd=["pytest", i])).encode(), "metadata.eval_cmd"),
        lambda i: (json.dumps(with_metadata(i, pre_commands=i)).encode(), "metadata.pre_commands"),
        lambda i: (json.dumps(with_metadata(i, swepro=f"run {i}", eval_cmd=None)).encode(), "metadata.swepro"),
        lambda i: (json.dumps(with_metadata(i, eval_cmd=None)).encode(), "metadata"),
        lambda i: (json.dumps(with_metadata(i, remote_env_info=[i])).encode(), "metadata.remote_env_info"),
        lambda i: (
            json.dumps(
                with_metadata(i, eval_cmd=None, swepro={"run_script_path": "/etc/shadow", "parser_script": "p"})
            ).encode(),
            "metadata.swepro.run_script_path",
        ),
        lambda i: (
            json.dumps(
                with_metadata(i, problem_statement=None) | {"prompt": [{"role": "system", "content": "s"}]}
            ).encode(),
            "metadata.problem_statement",
        ),
        lambda i: (
            json.dumps(
                with_metadata(i, remote_env_info={"test_patch": "diff", "FAIL_TO_PASS": "[not json"}, eval_cmd=None)
            ).encode(),
            "metadata.remote_env_info.FAIL_TO_PASS",
        ),
        lambda i: (b'{"prompt": "caf\xe9 ' + str(i).encode() + b'"}', "row"),
        lambda i: (b"[" * 50_000 + b"]" * 50_000, "row"),
        lambda i: (b'{"n": ' + b"7" * 5000 + b"}", "row"),
    ]
    rows = [kinds[i % len(kinds)](i) for i in range(98)]
    rows.insert(
        17,
        (
            json.dumps(
                {
                    **with_metadata(1000),
                    "prompt": "p" * 5_000_000,
                    "metadata": {**with_metadata(1000)["metadata"], "problem_statement": "p" * 5_000_000},
                }
            ).encode(),
            "metadata.problem_statement",
        ),
    )
    rows.insert(
        60, (json.dumps(with_metadata(1001, reference_patch="d" * 3_000_000)).encode(), "metadata.reference_patch")
    )
    return rows


def mixed_dataset(path) -> tuple[dict[int, str], dict[int, str]]:
    """Write 100 bad lines with the first three example rows among them; (good line -> instance id, bad line ->
    field)."""
    good_rows = [json.loads(json.dumps(row)) for row in EXAMPLES[:3]]
    good_rows[0]["metadata"]["instance_id"] = EMOJI_ID
    bad = bad_rows()
    lines, good, fields = [], {}, {}
    for number in range(1, len(bad) + len(good_rows) + 1):
        if number in (2, 51, 103):
            row = good_rows[len(good)]
            good[number] = row["metadata"].get("instance_id") or row["metadata"]["remote_env_info"]["instance_id"]
            lines.append(json.dumps(row).encode())
        else:
            text, field = bad[len(fields)]
            fields[number] = field
            lines.append(text)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return good, fields


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET))
    )
    policy_url = await policy.start()
    run_ids: list[str] = []
    async with local_cluster(policy_url, tmp_path_factory.mktemp("results"), BUDGETS) as (env, settings):
        yield env, settings, policy, run_ids
    await policy.stop()
    assert await containers_of_runs(run_ids) == []


def test_the_mixed_dataset_has_the_bad_rows_it_claims(tmp_path):
    good, fields = mixed_dataset(tmp_path / "mixed.jsonl")
    items = list(read_dataset(tmp_path / "mixed.jsonl"))
    assert len(fields) == 100 and len(good) == 3 and len(items) == 103
    assert {i.line: i.task.instance_id for i in items if isinstance(i, DatasetRow)} == good
    assert {i.line: i.field for i in items if not isinstance(i, DatasetRow)} == fields


@pytest.mark.asyncio(loop_scope="session")
async def test_100_malformed_rows_are_reported_and_every_good_row_completes(cluster, tmp_path, capsys, monkeypatch):
    env, settings, policy, run_ids = cluster
    policy.set_policy(None, "oracle")
    good, fields = mixed_dataset(tmp_path / "mixed.jsonl")
    out = tmp_path / "out" / "results.jsonl"
    run_ids.append(f"acc{uuid.uuid4().hex[:6]}")
    monkeypatch.setenv("ROLLOUT_TASK_QUEUE", settings.task_queue)
    args = parse_args(
        [
            "run",
            str(tmp_path / "mixed.jsonl"),
            "--run-id",
            run_ids[-1],
            "--out",
            str(out),
            "--concurrency",
            "3",
            "--max-new-tokens",
            "2048",
        ]
    )
    assert await run_dataset(env.client, args) == 1, "bad rows make the exit code 1; the starter still returns"
    err = capsys.readouterr().err
    for line, field in fields.items():
        assert f"line {line}: {field}:" in err
    records = [json.loads(text) for text in out.read_text().splitlines()]
    assert {r["line"]: r["abort_reason"] for r in records if r["status"] == "failed"} == {
        line: f"invalid_row:{field}" for line, field in fields.items()
    }
    completed = {r["line"]: r for r in records if r["status"] == "completed"}
    assert {line: r["prompt_key"] for line, r in completed.items()} == good
    assert all(r["workflow_id"].startswith(f"group-{run_ids[-1]}-") for r in completed.values())
    assert all(
        r["rewards"] == [1.0] and r["valid_mask"] == [True] and r["samples"][0]["rollout"]["segments"]
        for r in completed.values()
    )
    assert not any("packed" in r["samples"][0]["rollout"]["trajectory"] for r in completed.values()), (
        "segments, not their packed bytes too"
    )
    assert len(records) == 103

    kept = [text for text in out.read_text().splitlines() if json.loads(text).get("line") != 51]
    out.write_text("\n".join(kept) + "\n" + '{"workflow_id": "group-torn", "sta')
    assert await run_dataset(env.client, args) == 1
    again = [json.loads(text) for text in out.read_text().splitlines()]
    assert len(again) == 103 and again[:102] == [json.loads(text) for text in kept], (
        "nothing rewritten, the torn line cut"
    )
    assert (again[-1]["line"], again[-1]["status"], again[-1]["workflow_id"]) == (
        51,
        "completed",
        completed[51]["workflow_id"],
    )
    session = again[-1]["samples"][0]["rollout"]["agent"]["session_id"]
    assert session == completed[51]["samples"][0]["rollout"]["agent"]["session_id"], (
        "attached to the finished group, not re-run"
    )
    capsys.readouterr()
    assert await run_dataset(env.client, args) == 1
    assert len(out.read_text().splitlines()) == 103, "a complete file gains nothing"
    assert "3 of 3 groups" in capsys.readouterr().out


@pytest.mark.asyncio(loop_scope="session")
async def test_a_rollout_the_server_refuses_is_a_failed_result_line_and_the_others_complete(cluster, tmp_path):
    env, settings, policy, run_ids = cluster
    policy.set_policy(None, "noop")
    tasks = [row.task for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)][:2]
    refused = [
        tasks[0].model_copy(update={"instance_id": "x" * 2017}),
        tasks[0].model_copy(
            update={"instance_id": "huge", "problem_statement": "p" * (payload_store_from_env().max_bytes + 1)}
        ),
        tasks[0].model_copy(update={"instance_id": "lone\ud800surrogate"}),
    ]
    big = tasks[0].model_copy(update={"instance_id": "big", "problem_statement": "p" * 3_000_000})
    policy_spec = PolicySpec(sampling=SamplingParams(max_new_tokens=2048))
    batch = [rollout_input(t, 0, g, policy_spec, BUDGETS) for g, t in enumerate([tasks[0], *refused, big, tasks[1]])]
    run_ids.append(f"ref{uuid.uuid4().hex[:6]}")
    seen: list[RolloutResult] = []
    with ResultSink(tmp_path / "results.jsonl", record_with_segments) as sink:

        def on_result(result: RolloutResult) -> None:
            seen.append(result)
            sink.write(result)

        results = await run_rollouts(
            env.client, batch, run_ids[-1], concurrency=2, task_queue=settings.task_queue, on_result=on_result
        )
    assert [(r.status, r.abort_reason) for r in results] == [
        ("completed", None),
        ("failed", "start_rejected:INVALID_ARGUMENT"),
        ("failed", "payload_too_large"),
        ("failed", "exception:UnicodeEncodeError"),
        ("completed", None),
        ("completed", None),
    ], (
        "an input over the payload cap is refused by the client's converter; a 3 MB one goes to the payload store and "
        "runs"
    )
    assert "exceeds maximum allowed length" in results[1].error and f"over {MAX_ENV}=" in results[2].error
    assert [r.group_index for r in results] == [0, 1, 2, 3, 4, 5] and results[1].workflow_id.startswith(
        f"rollout-{run_ids[-1]}-xxx"
    )
    assert len(seen) == 6
    lines = [json.loads(text) for text in (tmp_path / "results.jsonl").read_text().splitlines()]
    statuses = [(0, "completed"), (1, "failed"), (2, "failed"), (3, "failed"), (4, "completed"), (5, "completed")]
    assert sorted((r["group_index"], r["status"]) for r in lines) == statuses
    logs = tmp_path / "results.jsonl.logs"
    for result in (r for r in results if r.status == "completed"):
        (line,) = [record for record in lines if record["workflow_id"] == result.workflow_id]
        assert line["segments"] and [TokenSegment.model_validate(s) for s in line["segments"]] == unpack_trajectory(
            result.trajectory
        )
        assert "packed" not in line["trajectory"], "the line holds the segments, not their packed bytes too"
        agent_log, grading_log = (
            logs / f"{file_stem(result.workflow_id)}.{suffix}" for suffix in ("agent.jsonl", "grading.log")
        )
        assert (line["agent"]["log"], line["agent"]["log_path"]) == ("", str(agent_log)) and result.agent.log
        assert agent_log.read_bytes() == result.agent.log.encode()
        assert (line["evaluation"]["log"], line["evaluation"]["log_path"]) == (
            "",
            str(grading_log),
        ) and result.evaluation.log
        assert grading_log.read_bytes() == result.evaluation.log.encode()
