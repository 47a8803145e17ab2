"""Settings read from the environment, each default in one place (the checkout's paths: ``durable_rollouts.paths``)."""
