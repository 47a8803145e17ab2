import re

import pytest

from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.trajectory_view.token_text import TokenTexts

TEXT = "<|im_start|>assistant\n<think>\nhé 你好 ünïcode 🎉\ttabs\r\n</think>\n<tool_call>{}</tool_call><|im_end|>"


def test_pieces_split_the_decoded_text_token_by_token_and_join_back_to_it(renderer):
    ids = renderer.encode(TEXT)
    texts = TokenTexts.from_dir(ensure_qwen_tokenizer())
    pieces = texts.pieces(ids)
    assert texts.text(ids) == TEXT and "".join(pieces) == TEXT and len(pieces) == len(ids)
    assert pieces[0] == "<|im_start|>" and "<think>" in pieces and "</think>" in pieces, (
        "added tokens read as their content"
    )
    assert "" in pieces and "🎉" in pieces, "a character split over two tokens reads whole on the token that ends it"
    assert texts.pieces([]) == [] and texts.text([10**9]) == f"<|id:{10**9}|>", (
        "an id outside the vocabulary is named, not an error"
    )


def test_a_folder_without_a_tokenizer_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "tokenizer.json"))):
        TokenTexts.from_dir(tmp_path)
