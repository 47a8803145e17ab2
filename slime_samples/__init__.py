"""Sample contracts: how a finished rollout becomes slime ``Sample`` objects, by the slime version it serves.

``seed`` (slime before June 2026) and ``current`` (slime's main branch since)
are chosen by name in ``registry``; ``trajectory_chains`` is today's
linearisation and ``sample_fields`` what both write the same way.
"""
