"""FizzBuzz up to the given limit, on one line."""
import sys

limit = int(sys.stdin.readline())
words = []
for n in range(1, limit + 1):
    words.append("FizzBuzz" if n % 15 == 0 else "Fizz" if n % 3 == 0 else "Buzz" if n % 5 == 0 else str(n))
print(" ".join(words))
