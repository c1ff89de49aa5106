"""vLLM DeepSeek-V4's top-k block-table gather, taken from the published wheels (scenario block_table_row_gather)."""
