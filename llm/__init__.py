"""The LLM layer under both apps: endpoint configuration (`JudgeConfig`), the call ledger
and cache (`LLMCall`), the endpoint checks, the client and the send pool. Studies'
normalization and judging's runs both use it; it imports neither."""
