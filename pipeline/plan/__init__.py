"""Plan: what the model is asked, in what order: work units and their row ids, account windows, prompts, token-length buckets and engine routing."""
