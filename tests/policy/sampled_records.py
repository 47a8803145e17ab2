"""What an adapter session's segments must be against the policy server's records of what it sampled."""


def assert_every_sample_is_a_record_in_its_context(result, records):
    """Each loss_mask=1 run is one recorded output, preceded by exactly that request's input ids, with its log-probs."""
    sampled = {(tuple(r.input_ids), tuple(r.output_ids)): r.output_logprobs for r in records}
    runs = [(s, a, b) for s in result.segments for a, b in s.sampled_runs()]
    assert len(runs) == len(records)
    for segment, start, end in runs:
        key = (tuple(segment.tokens[:start]), tuple(segment.tokens[start:end]))
        assert sampled[key] == segment.rollout_log_probs[start:end]
