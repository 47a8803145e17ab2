"""One shared PromptRenderer per test process (loading the tokenizer takes ~2 s)."""

from functools import lru_cache

from activities.prompt_renderer import PromptRenderer
from activities.tokenizer_cache import ensure_qwen_tokenizer


@lru_cache(maxsize=1)
def shared_renderer() -> PromptRenderer:
    return PromptRenderer(ensure_qwen_tokenizer())
