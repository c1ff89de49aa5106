"""DeepGEMM SM90 paged-MQA-logits metadata scheduler, as vLLM wheels bundle it (scenario paged_mqa_metadata_smem_read)."""
