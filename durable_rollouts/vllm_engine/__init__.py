"""The real policy engine of the project's tests and demo: vLLM's CPU build serving SmolLM2-135M-Instruct.

``gguf_checkpoint`` makes the float32 checkpoint (run in the engine's venv), ``local_engine`` starts, waits for and
stops a local engine, ``weight_updates`` is the trainer's side of an update. The adapter's client for the engine's
endpoint lives with the other policy clients (``durable_rollouts.policy.vllm_client``).
"""
