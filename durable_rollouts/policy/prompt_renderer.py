"""The policy's chat template and tokenizer, behind one small thread-safe object.

Any HF tokenizer directory works (``--tokenizer PATH``, like slime's
``--hf-checkpoint``). Encoding goes through the Rust backend's batch call,
which releases the GIL, so rendering in an executor thread does not stall the
event loop that serves other sessions. ``PromptRenderer.from_folder`` loads a folder once per process (until its
files change; ``durable_rollouts.folder_loads``), so workers and servers sharing a process share one. Importing it turns
off transformers' advisory warnings (``TRANSFORMERS_NO_ADVISORY_WARNINGS``) unless the environment sets them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Only transformers' tokenizers are used here: its advice that PyTorch is absent would open every worker log.
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

from transformers import AutoTokenizer  # noqa: E402

from durable_rollouts.folder_loads import load_once  # noqa: E402


class PromptRenderer:
    def __init__(self, tokenizer_dir: str | Path):
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        self._backend = self.tokenizer.backend_tokenizer
        self.end_of_turn: str = self.tokenizer.eos_token
        end_of_turn_id = self.tokenizer.convert_tokens_to_ids(self.end_of_turn)
        assert isinstance(end_of_turn_id, int), "one token converts to one id"
        self.end_of_turn_id = end_of_turn_id
        self.vocab_size: int = len(self.tokenizer)

    @classmethod
    def from_folder(cls, tokenizer_dir: str | Path) -> PromptRenderer:
        """The renderer of ``tokenizer_dir``, shared by every caller in this process while its files stay put."""
        return load_once(cls, tokenizer_dir)

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str:
        # list(tools): transformers asks for a list of dicts or callables (a list is invariant in its items).
        text = self.tokenizer.apply_chat_template(
            messages, tools=list(tools) if tools else None, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        assert isinstance(text, str), "tokenize=False renders text"
        return text

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return self._backend.encode_batch([text], add_special_tokens=False)[0].ids

    def decode(self, ids: list[int]) -> str:
        return self._backend.decode(ids, skip_special_tokens=False)
