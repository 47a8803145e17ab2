"""Convert Celsius readings to Fahrenheit."""
import sys


def to_fahrenheit(celsius: float) -> float:
    return celsius * 9 / 5 + 32


for token in sys.stdin.read().split():
    value = float(token)
    print(f"{value:.1f}C = {to_fahrenheit(value):.1f}F")
