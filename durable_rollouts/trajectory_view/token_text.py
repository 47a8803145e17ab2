"""Token ids back to text, token by token, under the policy's byte-level BPE tokenizer (its ``tokenizer.json``).

Invariants:

* ``TokenTexts.text(ids)`` is the UTF-8 decoding of the ids' bytes concatenated (invalid sequences replaced), so a
  character split over two tokens reads whole;
* ``TokenTexts.pieces(ids)`` splits that same text over the ids: piece ``i`` holds the characters completed by
  token ``i`` (empty when token ``i`` only starts a character the next one ends), so ``"".join(pieces) == text``;
* added tokens (``<|im_start|>``, ``<think>``, ...) read as their content; an id outside the vocabulary reads as
  ``<|id:N|>``, never an error;
* ``TokenTexts.from_dir`` loads a folder once per process while its files stay put (``durable_rollouts.folder_loads``).
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from durable_rollouts.folder_loads import load_once

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@cache
def _byte_of_char() -> dict[str, int]:
    """The byte-level BPE alphabet: the printable character standing for each byte (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


class TokenTexts:
    """The bytes of every token of one tokenizer, looked up by id (module invariants)."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer
        self._added = {i: token.content.encode() for i, token in tokenizer.get_added_tokens_decoder().items()}
        self._bytes: dict[int, bytes] = {}

    @classmethod
    def from_dir(cls, tokenizer_dir: str | Path) -> TokenTexts:
        """``FileNotFoundError`` naming the file when the folder holds no ``tokenizer.json``; ``ImportError`` naming
        the package when ``tokenizers`` (the worker extra) is not installed."""
        path = Path(tokenizer_dir) / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no tokenizer.json (name the policy's tokenizer folder)")
        return load_once(_load, path.parent)

    def token_id(self, content: str) -> int | None:
        """The id of the token spelled ``content``, None when the vocabulary has none."""
        return self._tokenizer.token_to_id(content)

    def bytes_of(self, token_id: int) -> bytes:
        known = self._bytes.get(token_id)
        if known is not None:
            return known
        if token_id in self._added:
            value = self._added[token_id]
        else:
            spelled = self._tokenizer.id_to_token(token_id)
            if spelled is None:
                value = f"<|id:{token_id}|>".encode()
            else:
                table = _byte_of_char()
                value = b"".join(bytes([table[c]]) if c in table else c.encode() for c in spelled)
        self._bytes[token_id] = value
        return value

    def text(self, ids: Sequence[int]) -> str:
        return b"".join(self.bytes_of(i) for i in ids).decode("utf-8", errors="replace")

    def pieces(self, ids: Sequence[int]) -> list[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces = [decoder.decode(self.bytes_of(i)) for i in ids]
        if pieces:
            pieces[-1] += decoder.decode(b"", final=True)
        return pieces


def _load(folder: Path) -> TokenTexts:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError(
            "reading token ids needs the tokenizers package: pip install tokenizers (or the worker extra)"
        ) from None
    return TokenTexts(Tokenizer.from_file(str(folder / "tokenizer.json")))
