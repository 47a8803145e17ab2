# make setup | make test | make demo ARGS="..."   (see scripts/setup.sh)
.DEFAULT_GOAL := help
.PHONY: help setup lint test test-fast docs demo

help:
	@echo "make setup             venv, Claude Code, tokenizer, Docker engine + base image, vLLM + SmolLM2 (idempotent)"
	@echo "make lint              ruff check, ruff format --check, mypy, shellcheck (needs the venv)"
	@echo "make test              setup, then lint, then pytest over three xdist workers by file"
	@echo "make test-fast         the tests that need no Docker, no Claude Code and no dev server (the venv must exist)"
	@echo "make docs              the documentation site, built strictly into site/ (the venv must exist)"
	@echo "make demo ARGS='...'   setup, then starter.py demo ARGS"
	@echo "SETUP_SKIP_DOCKER=1 skips the Docker steps; SETUP_SKIP_ENGINE=1 the engine and model (3.5 GB)."

setup:
	bash scripts/setup.sh

# Configured in pyproject.toml ([tool.ruff], [tool.mypy]); shellcheck takes every .sh file git does not ignore;
# any finding fails the target.
lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	git ls-files -z --cached --others --exclude-standard '*.sh' | xargs -0 shellcheck

# Three xdist workers on two cores (tests also wait on timers, so a third fills the CPU), each taking whole files
# (a module's shared cluster stays on one worker; docs/testing.md).
# pytest exit 5 = no tests collected: report it, but don't fail.
test: setup
	@$(MAKE) --no-print-directory lint
	@.venv/bin/python -m pytest -q -n 3 --dist loadfile tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests"; exit 0; fi; exit $$rc

# The inner loop: unit tests and Temporal's time-skipping server, nothing marked integration, over every core.
# No setup, no lint.
test-fast:
	.venv/bin/python -m pytest -q -m "not integration" -n auto tests

docs:
	.venv/bin/python -m durable_rollouts.config.settings_reference > docs/settings.md
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

demo: setup
	.venv/bin/python starter.py demo $(ARGS)
