"""Kafka 4 streams groups (KIP-1071): their fold (``fold``), values and rules (``model``: the
topology, tasks, the state and the offset-expiry rule), gold rows (``rows``)."""
