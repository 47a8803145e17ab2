"""The fork-per-input harness, run as the local runner runs it (a host subprocess): each job as ``python3 PATH <
stdin`` would be, with the preloaded modules as fresh imports."""

from durable_rollouts.drift_repair.script_runner import LocalScriptRunner

RANDOM_DRAW = "import random, statistics\nprint(random.random(), statistics.mean([1, 2, 3]))\n"
FAILING = "import sys\ndata = sys.stdin.read()\nprint(data.upper())\nraise ValueError(data)\n"


def test_each_job_draws_its_own_random_numbers_from_the_preloaded_modules():
    outcomes = LocalScriptRunner().run_many([(RANDOM_DRAW, "")] * 4, timeout_s=10)
    assert [o.exit_code for o in outcomes] == [0] * 4
    draws = [o.stdout.split()[0] for o in outcomes]
    assert len(set(draws)) == 4, "reseeded in every forked job, as a fresh interpreter is"
    assert {o.stdout.split()[1] for o in outcomes} == {"2"}


def test_a_failing_job_keeps_its_output_exit_code_and_a_traceback_from_its_own_frame():
    ok, failing = LocalScriptRunner().run_many([("print(input())\n", "hello\n"), (FAILING, "boom")], timeout_s=10)
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.timed_out) == (0, "hello\n", "", False)
    assert (failing.exit_code, failing.stdout) == (1, "BOOM\n")
    assert failing.stderr.startswith("Traceback (most recent call last):\n") and failing.stderr.endswith(
        "ValueError: boom\n"
    )
    assert "runner.py" not in failing.stderr, "the runner's own frames are cut"
