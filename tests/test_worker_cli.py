"""``worker.py``'s flags: a bad value is refused by the flag's name before the worker touches Docker or Temporal."""

from __future__ import annotations

import pytest

from worker import parse_args


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--adapter-port", "99999"], "argument --adapter-port: 99999 is more than 65535"),
        (["--adapter-port", "-1"], "argument --adapter-port: -1 is less than 0"),
        (["--scripted-policy", "bogus"], "argument --scripted-policy: invalid choice: 'bogus'"),
        (["--oracle-tasks", "no/such/rows.jsonl"], "argument --oracle-tasks: 'no/such/rows.jsonl': no such file or folder"),
    ],
)
def test_a_bad_flag_is_refused_by_its_name(argv, named, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2 and named in capsys.readouterr().err
