"""``worker.py``'s flags: a bad value is refused by the flag's name before the worker touches Docker or Temporal."""

from __future__ import annotations

import pytest

from tests.argparse_refusals import refusal
from worker import parse_args


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--adapter-port", "99999"], "argument --adapter-port: 99999 is more than 65535"),
        (["--adapter-port", "-1"], "argument --adapter-port: -1 is less than 0"),
        (["--scripted-policy", "bogus"], "argument --scripted-policy: invalid choice: 'bogus'"),
        (
            ["--oracle-tasks", "no/such/rows.jsonl"],
            "argument --oracle-tasks: 'no/such/rows.jsonl': no such file or folder",
        ),
    ],
)
def test_a_bad_flag_is_refused_by_its_name(argv, named, capsys):
    assert named in refusal(parse_args, argv, capsys)
