import pytest

from calc import evaluate


def test_single_number():
    assert evaluate("42") == 42


def test_precedence():
    assert evaluate("2 + 3 * 4") == 14


def test_parentheses():
    assert evaluate("(2 + 3) * 4") == 20


def test_division_is_left_associative():
    assert evaluate("100 / 10 / 5") == 2


def test_subtraction_is_left_associative():
    assert evaluate("10 - 3 - 2") == 5


def test_mixed_addition_and_subtraction():
    assert evaluate("1 - 2 + 3") == 2


def test_unary_minus():
    assert evaluate("-3 + 5") == 2


def test_rejects_garbage():
    with pytest.raises(ValueError):
        evaluate("2 $ 3")
