import pytest

from intervals import merge


def test_nothing_to_merge():
    assert merge([]) == []


def test_keeps_disjoint_intervals_sorted():
    assert merge([(5, 6), (1, 2)]) == [(1, 2), (5, 6)]


def test_joins_overlapping_intervals():
    assert merge([(1, 4), (3, 6), (2, 3)]) == [(1, 6)]


def test_joins_intervals_that_touch():
    assert merge([(1, 2), (2, 3)]) == [(1, 3)]


def test_rejects_reversed_intervals():
    with pytest.raises(ValueError):
        merge([(3, 1)])
