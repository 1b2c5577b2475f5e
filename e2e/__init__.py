"""End-to-end tests and the scripts that bring their clusters up (kind or local)."""
