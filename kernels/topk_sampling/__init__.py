"""FlashInfer's top-k sampling kernel, built from the published wheels' headers (scenario sampling_threshold_overread)."""
