"""The monitoring face: Prometheus metrics and a Burrow-like HTTP status, read-only from the tables."""
