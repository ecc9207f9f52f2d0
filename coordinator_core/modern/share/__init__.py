"""Kafka 4 share groups (KIP-932): their fold (``fold``), values and rules (``model``), gold
rows (``rows``). Share groups keep no offsets in ``__consumer_offsets`` and never expire."""
