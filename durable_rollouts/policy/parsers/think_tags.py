"""Reasoning between an opening and a closing tag (``<think>…</think>`` and its kin), as SGLang's reasoning
detectors split it (``sglang/srt/parser/reasoning_parser.py``).

* The closing tag is there: what precedes its first occurrence is reasoning
  (a leading opening tag dropped; chat templates may put it in the generation
  prompt, so it need not be in the completion), the rest is the answer.
* No closing tag: if the family always reasons first (``forced``, SGLang's
  ``force_reasoning``) or the completion opens with the opening tag (a
  length cut-off mid-thought), all of it is reasoning, except that an
  ``interrupt`` marker (the family's tool-call opening, which its models
  may emit without closing the thought) ends the reasoning and starts the
  rest. Otherwise there is no reasoning and all of it is the answer.

One deliberate difference from SGLang: a closing tag splits even when the
family is not ``forced`` and no opening tag was emitted (SGLang's unforced
detectors then return everything as the answer), which is what a template
that opens the thought in the prompt produces.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThinkTags:
    opening: str
    closing: str
    forced: bool = False
    interrupt: str | None = None

    def __call__(self, text: str) -> tuple[str, str]:
        thought, closed, rest = text.partition(self.closing)
        if closed:
            return self._reasoning(thought), rest
        if not (self.forced or text.lstrip().startswith(self.opening)):
            return "", text
        cut = text.find(self.interrupt) if self.interrupt else -1
        if cut != -1:
            return self._reasoning(text[:cut]), text[cut:]
        return self._reasoning(text), ""

    def _reasoning(self, thought: str) -> str:
        return thought.strip().removeprefix(self.opening).strip()
