"""The policy path: Anthropic requests in, chat-template rendering, SGLang token ids out, every sampled token
recorded."""
