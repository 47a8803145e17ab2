import pytest

from roman import to_roman


def test_adds_numerals():
    assert [to_roman(n) for n in (1, 3, 6, 15, 2023)] == ["I", "III", "VI", "XV", "MMXXIII"]


@pytest.mark.parametrize("number", [0, -1, 4000, 2.5])
def test_rejects_numbers_without_a_numeral(number):
    with pytest.raises(ValueError):
        to_roman(number)
