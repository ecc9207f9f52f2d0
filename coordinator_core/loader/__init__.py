"""The loader: a group's records folded into a snapshot as Kafka's coordinator loads them (classic
groups, and the consumer groups it holds), its snapshot and the snapshot's bytes, commit runs and
transactions (ARCHITECTURE.md, "The core's rooms")."""
