"""A rollout and a run as self-contained HTML pages, in layers: ``token_text`` (ids back to text),
``conversation`` (a segment read as messages and replies), ``training_samples`` (what the contract in force makes
of them), ``activity_timeline`` (the time line's shape), ``markup`` and ``svg_charts`` (escaping, plots),
``timeline_section`` / ``verdict_sections`` / ``rollout_page`` / ``run_report`` (the pages). Reading them from
Temporal is ``trainer_client.rollout_pages``'s; the browser that checks them is ``testbed.headless_chromium``.
"""
