"""Temperature conversions between Celsius, Fahrenheit and Kelvin."""

from tempconv.convert import to_celsius, to_fahrenheit, to_kelvin

__version__ = "0.1.0"
__all__ = ["to_celsius", "to_fahrenheit", "to_kelvin"]
