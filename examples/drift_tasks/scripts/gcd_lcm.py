"""Greatest common divisor and least common multiple of two integers."""
import math
import sys

a, b = (int(token) for token in sys.stdin.read().split())
print("gcd:", math.gcd(a, b))
print("lcm:", a * b // math.gcd(a, b))
print("circle:", round(math.pi * a, 2))
