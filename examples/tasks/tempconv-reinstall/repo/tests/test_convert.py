import importlib.metadata

import pytest

import tempconv
from tempconv import to_celsius, to_fahrenheit, to_kelvin


def test_the_installed_distribution_is_this_package():
    assert importlib.metadata.version("tempconv") == tempconv.__version__


def test_celsius_to_fahrenheit():
    assert to_fahrenheit(100) == pytest.approx(212)
    assert to_fahrenheit(-40) == pytest.approx(-40)


def test_fahrenheit_to_celsius():
    assert to_celsius(212) == pytest.approx(100)
    assert to_celsius(32) == pytest.approx(0)
    assert to_celsius(-40) == pytest.approx(-40)


def test_kelvin_round_trip():
    assert to_kelvin(0) == pytest.approx(273.15)
    assert to_celsius(0, "K") == pytest.approx(-273.15)
    assert to_kelvin(98.6, "F") == pytest.approx(310.15)


def test_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit"):
        to_celsius(1, "R")
