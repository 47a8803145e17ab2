"""The library behind the Temporal faces: everything that is neither an entry script nor an activity or workflow.

Layers, bottom first (a subpackage imports only its own layer or lower ones, and none imports ``temporalio``
except ``trainer_client``, the trainer's Temporal client; ``tests/test_package_layout.py`` checks it):

* ``contracts``: the pydantic models workflows, activities and the trainer exchange; ``paths``: the checkout
  and its cache;
* ``policy`` (the Anthropic adapter: translation, sessions, token capture, its HTTP server),
  ``docker_sandbox``, ``task_sources``;
* ``config`` (every setting, read from the environment), ``grading``, ``claude_code``, ``drift_repair``,
  ``slime_samples``, ``logprob_check`` (the trainer's recompute of every trained token's log-prob; torch);
* ``scripted_policy`` (the SGLang stand-in of tests and the demo), ``vllm_engine`` (the real engine and model
  of the tests and the demo: building the checkpoint, starting the engine, the trainer's weight update);
* ``trainer_client`` (connecting, starting and reading rollouts; what ``starter.py`` and the slime drop-ins call).
"""
