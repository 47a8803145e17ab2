"""The cached tokenizer folder declares its added tokens in its config, and that changes nothing it encodes."""

from __future__ import annotations

import json
import shutil

from transformers import AutoTokenizer

from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer

TEXT = "<|im_start|>user\nfix <think> the bug<|im_end|>\n<|endoftext|><tool_call>{}</tool_call>"


def test_a_folder_without_declared_added_tokens_gets_them_and_encodes_the_same(tmp_path):
    cached = ensure_qwen_tokenizer()
    config = json.loads((cached / "tokenizer_config.json").read_text())
    declared = config.pop("added_tokens_decoder")
    assert {token["content"] for token in declared.values()} >= {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}

    folder = tmp_path / "tokenizer"
    shutil.copytree(cached, folder)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    undeclared = AutoTokenizer.from_pretrained(str(folder))

    assert ensure_qwen_tokenizer(folder) == folder
    assert json.loads((folder / "tokenizer_config.json").read_text())["added_tokens_decoder"] == declared
    assert sorted(path.name for path in folder.iterdir()) == sorted(path.name for path in cached.iterdir())
    completed = AutoTokenizer.from_pretrained(str(folder))
    assert completed.encode(TEXT) == undeclared.encode(TEXT)
    assert completed.added_tokens_decoder == undeclared.added_tokens_decoder
    assert (completed.eos_token, completed.pad_token) == (undeclared.eos_token, undeclared.pad_token) == ("<|im_end|>", "<|endoftext|>")
