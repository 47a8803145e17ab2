"""Settings read from the environment and the project's paths, each default in one place."""
