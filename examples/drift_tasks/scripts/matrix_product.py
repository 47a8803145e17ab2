"""Multiply a matrix by its transpose; print the product and its trace."""
import sys


def parse(text: str) -> list[list[int]]:
    return [[int(x) for x in line.split()] for line in text.strip().splitlines()]


def transpose(matrix: list[list[int]]) -> list[list[int]]:
    return [list(column) for column in zip(*matrix)]


def multiply(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    return [[sum(x * y for x, y in zip(row, column)) for column in transpose(b)] for row in a]


matrix = parse(sys.stdin.read())
product = multiply(matrix, transpose(matrix))
for row in product:
    print(" ".join(str(value).rjust(5) for value in row))
print("trace:", sum(product[i][i] for i in range(len(product))))
