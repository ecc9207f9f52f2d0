"""Kafka 4's groups (the new coordinator): consumer groups (KIP-848), share groups (KIP-932)."""
