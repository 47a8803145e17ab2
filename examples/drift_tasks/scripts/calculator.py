"""Evaluate arithmetic expressions with + - * / and parentheses (shunting-yard, exact fractions)."""
import operator
import re
import sys
from fractions import Fraction

TOKEN = re.compile(r"\s*(\d+|[()+*/-])")
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def tokenize(expression: str) -> list[str]:
    return TOKEN.findall(expression)


def to_postfix(tokens: list[str]) -> list[str]:
    output, stack = [], []
    for token in tokens:
        if token.isdigit():
            output.append(token)
        elif token == "(":
            stack.append(token)
        elif token == ")":
            while stack[-1] != "(":
                output.append(stack.pop())
            stack.pop()
        else:
            while stack and stack[-1] != "(" and PRECEDENCE[stack[-1]] >= PRECEDENCE[token]:
                output.append(stack.pop())
            stack.append(token)
    output.extend(reversed(stack))
    return output


def evaluate(postfix: list[str]) -> Fraction:
    stack = []
    for token in postfix:
        stack.append(Fraction(token) if token.isdigit() else APPLY[token](*reversed([stack.pop(), stack.pop()])))
    return stack.pop()


for line in sys.stdin.read().splitlines():
    result = evaluate(to_postfix(tokenize(line)))
    print(f"{line.strip()} = {result} ({float(result):.3f})")
