"""The shipped drift corpus and the baseline loop over all of it, scored by the pure-Python path (no Docker).

Acceptance: baseline drift + oracle repair succeeds on >= 95% of the corpus,
baseline drift + no-op repair on none, and every spec the baseline can pick
really breaks the script (on the visible input and on every held-out input).
"""

from __future__ import annotations

import importlib.util
import json
import random
from collections import Counter

import pytest

from durable_rollouts.contracts.drift_repair import SampleRequest
from durable_rollouts.drift_repair.baselines import candidate_specs
from durable_rollouts.drift_repair.corpus import CORPUS_DIR, UnknownTask, load_corpus, sample_task, tasks_of
from durable_rollouts.drift_repair.offline import score_corpus
from durable_rollouts.drift_repair.primitives import apply_spec
from durable_rollouts.drift_repair.script_runner import LocalScriptRunner


def make_corpus_module():
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS_DIR / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_corpus_has_thirty_tasks_three_levels_and_every_category():
    corpus = load_corpus()
    assert len(corpus) >= 30
    assert set(Counter(t.difficulty for t in corpus.values())) == {"easy", "medium", "hard"}
    assert set(Counter(t.category for t in corpus.values())) == {
        "api_rename",
        "kwarg_change",
        "import_move",
        "argument_order",
        "attribute_change",
    }
    assert all(len(t.held_out) >= 3 and t.versions for t in corpus.values())


def test_corpus_json_is_what_make_corpus_writes_from_the_scripts():
    """Every original script prints exactly its recorded expected output for every input, cleanly."""
    assert make_corpus_module().build() == json.loads((CORPUS_DIR / "corpus.json").read_text())


def test_sampling_is_deterministic_and_respects_difficulty():
    corpus = load_corpus()
    easy = tasks_of(corpus, "easy")
    assert sample_task(corpus, SampleRequest(difficulty="easy", seed=3)) == easy[3 % len(easy)]
    assert sample_task(corpus, SampleRequest(task_id="calculator", difficulty="easy")).task_id == "calculator"
    with pytest.raises(UnknownTask):
        sample_task(corpus, SampleRequest(task_id="no-such-task"))


def test_every_baseline_candidate_breaks_every_input():
    corpus = load_corpus()
    jobs, labels = [], []
    for task in corpus.values():
        for _, spec in candidate_specs(task.script, random.Random(0)):
            broken = apply_spec(task.script, spec).script
            for case in [task.visible, *task.held_out]:
                jobs.append((broken, case.stdin))
                labels.append((task.task_id, spec.primitive_type, json.dumps(spec.params)))
    assert len(set(labels)) > 5 * len(corpus)
    outcomes = LocalScriptRunner().run_many(jobs, timeout_s=5)
    survivors = sorted({label for label, outcome in zip(labels, outcomes, strict=True) if outcome.ran})
    assert survivors == []


@pytest.mark.parametrize("seed", [0, 1])
def test_baseline_drift_with_oracle_repair_succeeds_on_the_corpus(seed):
    episodes = score_corpus(list(load_corpus().values()), "oracle", seed)
    assert all(e.breakage.valid and e.breakage.error_trace.strip() for e in episodes)
    success = sum(e.grade.success for e in episodes) / len(episodes)
    assert success >= 0.95
    assert all(e.grade.reward == 1.0 and e.grade.applied_cleanly for e in episodes if e.grade.success)


@pytest.mark.parametrize("seed", [0, 1])
def test_baseline_drift_with_noop_repair_never_succeeds(seed):
    episodes = score_corpus(list(load_corpus().values()), "noop", seed)
    assert [e.task_id for e in episodes if e.grade.success] == []
    assert all(e.grade.applied_cleanly and e.grade.reward == 0.0 for e in episodes)
