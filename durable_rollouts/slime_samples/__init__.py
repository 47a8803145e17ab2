"""Sample contracts: how a finished rollout becomes slime ``Sample`` objects, by the slime version it serves.

``seed`` (slime ad3b874 to 243773c) and ``current`` (slime's main branch since) are chosen by name in
``registry``; ``message_tree`` is slime's ``TrajectoryManager`` rule on the project's turn log,
``options`` what the trainer's settings change, and ``sample_fields`` what both write the same way.
"""
