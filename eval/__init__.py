"""`pipeline eval`: extraction quality against the synthetic held-out set and against real gold folders."""
