"""Plain torch implementations: the numerical reference every faster kernel is tested against."""
