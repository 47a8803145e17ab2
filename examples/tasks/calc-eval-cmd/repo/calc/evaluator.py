"""Recursive-descent evaluation of + - * / and parentheses."""

from calc.tokenizer import tokenize


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self):
        token = self.peek()
        self.pos += 1
        return token

    def expression(self):
        left = self.term()
        if self.peek() in ("+", "-"):
            op = self.take()
            right = self.expression()
            return left + right if op == "+" else left - right
        return left

    def term(self):
        left = self.factor()
        while self.peek() in ("*", "/"):
            op = self.take()
            right = self.factor()
            left = left * right if op == "*" else left / right
        return left

    def factor(self):
        token = self.take()
        if token == "(":
            value = self.expression()
            if self.take() != ")":
                raise ValueError("missing closing parenthesis")
            return value
        if token == "-":
            return -self.factor()
        if isinstance(token, float):
            return token
        raise ValueError(f"unexpected token {token!r}")


def evaluate(text):
    """Evaluate an arithmetic expression; operators of equal precedence associate to the left."""
    parser = _Parser(tokenize(text))
    value = parser.expression()
    if parser.peek() is not None:
        raise ValueError(f"trailing input at token {parser.pos}")
    return value
