"""First-run acceptance checks: what a host must show once, on the real engine, before its results are trusted."""
