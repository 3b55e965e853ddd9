"""Answer keys proved by execution: checking a key against a run (`check`), and the verification
record kept per environment, with the one staleness rule (`record`)."""
