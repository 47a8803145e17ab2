import sys

sys.path.insert(0, "/app")

from convert import celsius_to_fahrenheit, fahrenheit_to_celsius  # noqa: E402


def test_boiling_and_freezing_points():
    assert fahrenheit_to_celsius(212) == 100.0
    assert fahrenheit_to_celsius(32) == 0.0


def test_round_trip():
    for celsius in (-40.0, 0.0, 37.0, 100.0):
        assert abs(fahrenheit_to_celsius(celsius_to_fahrenheit(celsius)) - celsius) < 1e-9
