"""`pipeline bench`: the standard workload on the engine's optimisation ladder, side by side with HF baselines."""
