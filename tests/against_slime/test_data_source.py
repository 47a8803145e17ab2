"""``slime_rollout.next_prompts`` on slime's own ``RolloutDataSource``, loaded from the example dataset as slime
loads a prompt file: the prompts it reads ahead are the ones the next ``get_samples`` hands out, and reading
them draws nothing."""

from __future__ import annotations

from tests.against_slime import require_slime

require_slime()

from slime.rollout.data_source import RolloutDataSource  # noqa: E402

import slime_generate  # noqa: E402
import slime_rollout  # noqa: E402
from durable_rollouts.paths import EXAMPLE_DATASET  # noqa: E402
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer  # noqa: E402
from tests.against_slime.slime_code import args_for  # noqa: E402


def data_source() -> RolloutDataSource:
    return RolloutDataSource(
        args_for(
            rollout_global_dataset=True,
            prompt_data=str(EXAMPLE_DATASET),
            hf_checkpoint=str(ensure_qwen_tokenizer()),
            dump_details=None,
            rollout_max_prompt_len=None,
            input_key="prompt",
            multimodal_keys=None,
            label_key=None,
            metadata_key="metadata",
            tool_key=None,
            apply_chat_template=False,
            apply_chat_template_kwargs=None,
            rollout_seed=42,
            rollout_shuffle=True,
            n_samples_per_prompt=2,
        )
    )


def test_the_prompts_read_ahead_are_the_ones_slimes_next_draw_hands_out():
    source = data_source()
    rows = len(source.dataset)
    assert rows >= 3
    ahead = slime_rollout.next_prompts(source, 2)
    assert source.sample_offset == 0, "reading ahead draws nothing"
    drawn = source.get_samples(2)
    assert [slime_generate.task_of(p).instance_id for p in ahead] == [
        slime_generate.task_of(group[0]).instance_id for group in drawn
    ]
    assert [len(slime_rollout.next_prompts(source, rows)), len(slime_rollout.next_prompts(source, 1))] == [
        rows - 2,
        1,
    ], "not past the epoch"
