"""Kafka 4's consumer groups (KIP-848): the group as a value, the fold of its records, one handler
per record type, its events and its gold rows (ARCHITECTURE.md, "The core's rooms")."""
