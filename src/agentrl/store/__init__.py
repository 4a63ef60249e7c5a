"""Layer 1: run-folder files: the one JSONL writer (`jsonl`), output locks (`lock`), trajectory
records (`records`) and the evaluation file layout (`eval_records`)."""
