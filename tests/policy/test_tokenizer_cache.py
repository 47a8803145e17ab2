"""The cached tokenizer folder declares its added tokens in its config, that changes nothing it encodes, and a
folder outside the project's cache is never written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

from transformers import AutoTokenizer

from durable_rollouts.policy.tokenizer_cache import declare_added_tokens, ensure_qwen_tokenizer

TEXT = "<|im_start|>user\nfix <think> the bug<|im_end|>\n<|endoftext|><tool_call>{}</tool_call>"


def _undeclared_copy(cached, folder):
    config = json.loads((cached / "tokenizer_config.json").read_text())
    declared = config.pop("added_tokens_decoder")
    shutil.copytree(cached, folder)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return declared


def test_declaring_the_added_tokens_changes_nothing_the_tokenizer_encodes(tmp_path):
    cached = ensure_qwen_tokenizer()
    folder = tmp_path / "tokenizer"
    declared = _undeclared_copy(cached, folder)
    assert {token["content"] for token in declared.values()} >= {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}
    undeclared = AutoTokenizer.from_pretrained(str(folder))

    declare_added_tokens(folder)
    assert json.loads((folder / "tokenizer_config.json").read_text())["added_tokens_decoder"] == declared
    assert sorted(path.name for path in folder.iterdir()) == sorted(path.name for path in cached.iterdir())
    completed = AutoTokenizer.from_pretrained(str(folder))
    assert completed.encode(TEXT) == undeclared.encode(TEXT)
    assert completed.added_tokens_decoder == undeclared.added_tokens_decoder
    assert (
        (completed.eos_token, completed.pad_token)
        == (undeclared.eos_token, undeclared.pad_token)
        == ("<|im_end|>", "<|endoftext|>")
    )


def test_a_tokenizer_folder_outside_the_cache_is_left_as_it_is(tmp_path):
    folder = tmp_path / "policy-tokenizer"
    _undeclared_copy(ensure_qwen_tokenizer(), folder)
    before = (folder / "tokenizer_config.json").read_bytes()
    assert ensure_qwen_tokenizer(folder) == folder
    assert (folder / "tokenizer_config.json").read_bytes() == before


def test_a_build_encodes_as_the_cached_folder_and_leaves_nothing_in_the_temp_folder(tmp_path, monkeypatch):
    """tiktoken would keep a copy of the ranks file the conversion reads under ``$TMPDIR/data-gym-cache``."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    built = ensure_qwen_tokenizer(tmp_path / "built")
    assert list(temp.iterdir()) == []
    assert "TIKTOKEN_CACHE_DIR" not in os.environ
    fresh, cached = (
        AutoTokenizer.from_pretrained(str(built)),
        AutoTokenizer.from_pretrained(str(ensure_qwen_tokenizer())),
    )
    assert fresh.encode(TEXT) == cached.encode(TEXT)
    assert fresh.apply_chat_template([{"role": "user", "content": TEXT}], tokenize=False) == cached.apply_chat_template(
        [{"role": "user", "content": TEXT}], tokenize=False
    )


def test_the_command_line_takes_help_as_help_not_as_the_folder_to_build(tmp_path):
    shown = subprocess.run(
        [sys.executable, "-m", "durable_rollouts.policy.tokenizer_cache", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and shown.stdout.startswith(
        "usage: python -m durable_rollouts.policy.tokenizer_cache [-h] [folder]"
    )
    assert list(tmp_path.iterdir()) == [], "nothing built"
