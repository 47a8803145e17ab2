"""The entry scripts' flag types: finite numbers in range, counts in range, paths that exist."""

from __future__ import annotations

import argparse

import pytest

from durable_rollouts.config.arg_types import count_arg, existing_path_arg, number_arg, port_arg, share_arg


@pytest.mark.parametrize(
    ("parse", "value", "says"),
    [
        (number_arg(0), "nan", "'nan' is not a finite number"),
        (number_arg(0), "-inf", "'-inf' is not a finite number"),
        (number_arg(0), "-0.5", "-0.5 is not at least 0"),
        (number_arg(0, above=True), "0", "0 is not more than 0"),
        (number_arg(0), "soon", "'soon' is not a number"),
        (count_arg(1), "0", "0 is less than 1"),
        (count_arg(1), "2.5", "'2.5' is not an integer"),
        (port_arg, "65536", "65536 is more than 65535"),
        (share_arg, "1.5", "1.5 is not between 0 and 1"),
        (share_arg, "nan", "'nan' is not a finite number"),
        (existing_path_arg, "no/such/rows.jsonl", "'no/such/rows.jsonl': no such file or folder"),
    ],
)
def test_a_value_out_of_range_is_refused_saying_why(parse, value, says):
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{says.replace('(', '[(]').replace('.', '[.]')}$"):
        parse(value)


def test_values_in_range_pass(tmp_path):
    assert (
        number_arg(0)("0"),
        number_arg(0, above=True)("0.25"),
        count_arg(0)("0"),
        port_arg("0"),
        share_arg("1"),
    ) == (0.0, 0.25, 0, 0, 1.0)
    assert existing_path_arg(str(tmp_path)) == str(tmp_path)
