"""Drift -> repair self-play: corpus, drift primitives, role prompts and parsers, scoring, script runners."""
