"""Roman numerals."""

__all__ = ["to_roman"]

_NUMERALS = ((1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I"))


def to_roman(number):
    """``number`` (1 to 3999) in Roman numerals."""
    if not isinstance(number, int) or not 0 < number < 4000:
        raise ValueError(f"no Roman numeral for {number!r}")
    digits = []
    for value, numeral in _NUMERALS:
        count, number = divmod(number, value)
        digits.append(numeral * count)
    return "".join(digits)
