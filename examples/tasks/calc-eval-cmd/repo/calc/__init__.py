"""A tiny arithmetic expression evaluator."""

from calc.evaluator import evaluate

__version__ = "0.3.1"
__all__ = ["evaluate"]
