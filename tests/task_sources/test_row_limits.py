"""Rows that could not travel through Temporal are refused when read, naming the field and the limit."""

import json

import pytest

from durable_rollouts.task_sources.dataset_rows import RowError, read_dataset, task_from_row
from durable_rollouts.task_sources.row_limits import MAX_INSTANCE_ID_BYTES, MAX_TASK_BYTES

GOOD = {
    "prompt": "fix it",
    "metadata": {"instance_id": "calc-1", "image": "img", "workdir": "/w", "eval_cmd": "pytest -q"},
}


def row(**metadata):
    return {"prompt": GOOD["prompt"], "metadata": {**GOOD["metadata"], **metadata}}


def refusal(raw) -> RowError:
    with pytest.raises(RowError) as caught:
        task_from_row(raw, 7)
    return caught.value


@pytest.mark.parametrize(
    "raw, field",
    [
        (row(instance_id="bad\ud800id"), "metadata.instance_id"),
        ({"prompt": [{"role": "user", "content": "x\udfffy"}], "metadata": GOOD["metadata"]}, "prompt[0].content"),
        (row(extra={"nested": ["ok", "\ud83d"]}), "metadata.extra.nested[1]"),
        (row(**{"key\ud800": 1}), "metadata"),
    ],
)
def test_a_lone_surrogate_anywhere_is_refused_naming_where(raw, field):
    error = refusal(raw)
    assert (error.field, error.line) == (field, 7) and "surrogate" in error.reason
    str(error).encode()  # the message itself never carries the surrogate


def test_an_instance_id_over_the_limit_is_refused_with_the_limit_stated():
    error = refusal(row(instance_id="x" * 2017))
    assert (
        error.field == "metadata.instance_id"
        and "2,017 bytes" in error.reason
        and f"{MAX_INSTANCE_ID_BYTES}-byte limit" in error.reason
    )
    from_remote = {
        "prompt": "p",
        "metadata": {
            "remote_env_info": {"instance_id": "é" * 300, "image_url": "i", "workdir": "/w", "f2p_script": "pass"}
        },
    }
    assert refusal(from_remote).field == "metadata.remote_env_info.instance_id", (
        "600 bytes of UTF-8, named where the row carried it"
    )
    assert refusal(row(instance_id="two\nlines")).reason == "contains control characters"
    assert task_from_row(row(instance_id="Crème-🦀-" + "é" * 200)).instance_id.startswith("Crème"), (
        "any Unicode within the limit is fine"
    )


def test_a_task_over_the_payload_limit_is_refused_naming_the_largest_field():
    error = refusal({"prompt": "p" * 5_000_000, "metadata": dict(GOOD["metadata"])})
    assert (
        error.field == "prompt"
        and "512 KiB" in error.reason
        and "2 MiB" in error.reason
        and "5,000,002 bytes" in error.reason
    )
    assert refusal(row(reference_patch="d" * (MAX_TASK_BYTES + 1))).field == "metadata.reference_patch"
    assert task_from_row(row(reference_patch="d" * (MAX_TASK_BYTES // 2))).reference_patch


def test_lines_that_are_not_utf8_or_not_parseable_json_are_reported_and_reading_goes_on(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                b'{"prompt": "caf\xe9"}',
                b"[" * 100_000 + b"]" * 100_000,
                b'{"n": ' + b"9" * 5000 + b"}",
                json.dumps(GOOD).encode(),
            ]
        )
        + b"\n"
    )
    items = list(read_dataset(path))
    assert [(i.line, i.field) for i in items[:3]] == [(1, "row"), (2, "row"), (3, "row")]
    assert (
        "not UTF-8" in items[0].reason and "unreadable JSON" in items[1].reason and "unreadable JSON" in items[2].reason
    )
    assert items[3].task.instance_id == "calc-1"
