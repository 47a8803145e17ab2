# make setup | make test | make demo ARGS="..."   (see scripts/setup.sh)
.DEFAULT_GOAL := help
.PHONY: help setup test demo

help:
	@echo "make setup             venv, Claude Code, tokenizer, Docker engine + base image (idempotent)"
	@echo "make test              setup, then pytest -q tests"
	@echo "make demo ARGS='...'   setup, then starter.py demo ARGS"
	@echo "SETUP_SKIP_DOCKER=1 skips the Docker steps."

setup:
	bash scripts/setup.sh

# pytest exit 5 = no tests collected: report it, but don't fail.
test: setup
	@.venv/bin/python -m pytest -q tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests"; exit 0; fi; exit $$rc

demo: setup
	.venv/bin/python starter.py demo $(ARGS)
