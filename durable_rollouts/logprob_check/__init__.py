"""The trainer's log-prob check: every trained token's rollout log-prob against the trainer's own recompute.

RL trainers log the rollout–training mismatch; this is that check made exact. ``sequences`` turns what the trainer
receives (slime samples, or the trajectory's token segments) into ``TrainedSequence``s; ``recompute`` runs each
version's checkpoint with transformers in float32 over every sequence and compares each trained token;
``report`` is what it says (max and mean |Δ|, tokens over the threshold, the first offender). Run it with
``python -m durable_rollouts.logprob_check`` in an environment with torch (the engine's venv has one).
"""
