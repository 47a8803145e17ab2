"""A scripted policy server speaking SGLang's /generate protocol offline (the demo and the tests use it)."""
