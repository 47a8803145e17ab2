"""Each function converts a temperature given in ``unit`` ("C", "F" or "K")."""

ABSOLUTE_ZERO_C = -273.15


def _celsius(value: float, unit: str) -> float:
    if unit == "C":
        return value
    if unit == "F":
        return (value - 32) * 9 / 5
    if unit == "K":
        return value + ABSOLUTE_ZERO_C
    raise ValueError(f"unknown unit {unit!r}")


def to_celsius(value: float, unit: str = "F") -> float:
    return _celsius(value, unit)


def to_fahrenheit(value: float, unit: str = "C") -> float:
    return _celsius(value, unit) * 9 / 5 + 32


def to_kelvin(value: float, unit: str = "C") -> float:
    return _celsius(value, unit) - ABSOLUTE_ZERO_C
