"""The trainer's side of drift → repair episodes: GRPO groups, workflow ids, the starter's CLI entry."""

from durable_rollouts.contracts.workflow_ids import episode_workflow_id
from durable_rollouts.drift_repair.corpus import load_corpus, tasks_of
from durable_rollouts.trainer_client.drift_episodes import episode_groups, episode_inputs
from starter import parse_args


def test_k_episodes_per_task_share_a_group_and_differ_in_seed():
    tasks = tasks_of(load_corpus(), "easy")
    episodes = episode_inputs(tasks, n=5, k=2, seed=4, drift_policy="baseline", repair_policy="oracle")
    assert [(e.group_index, e.sample_index) for e in episodes] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    assert episodes[0].task_id == episodes[1].task_id != episodes[2].task_id
    assert len({e.seed for e in episodes}) == 5 and {e.task_id for e in episodes} <= {t.task_id for t in tasks}
    assert episode_inputs(tasks, n=5, k=2, seed=4, drift_policy="baseline", repair_policy="oracle") == episodes
    assert len({episode_workflow_id("r1", e) for e in episodes}) == 5


def test_groups_cycle_through_the_tasks():
    tasks = tasks_of(load_corpus(), "hard")
    episodes = episode_inputs(tasks, n=len(tasks) + 1)
    assert len({e.task_id for e in episodes}) == len(tasks) and episodes[-1].task_id == episodes[0].task_id


def test_the_episodes_command_defaults():
    args = parse_args(["episodes", "--n", "32", "--difficulty", "easy", "--k", "4"])
    assert (args.n, args.k, args.difficulty, args.drift_policy, args.repair_policy) == (32, 4, "easy", "model", "model")


def test_episode_groups_are_one_group_per_group_index_with_min_valid_capped_at_a_short_last_group():
    tasks = tasks_of(load_corpus(), "easy")
    groups = episode_groups(episode_inputs(tasks, n=5, k=2), "r1", min_valid=2)
    assert [(g.group_index, g.size, g.valid_needed, g.kind) for g in groups] == [
        (0, 2, 2, "episode"),
        (1, 2, 2, "episode"),
        (2, 1, 1, "episode"),
    ]
    assert all(len({e.task_id for e in g.episodes}) == 1 for g in groups)
