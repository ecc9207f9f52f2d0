"""The bytes of ``__consumer_offsets``: the wire engine, record values, the classic and modern codecs,
the consumer protocol's blobs and the console formatter's JSON (ARCHITECTURE.md, "The core's rooms")."""
