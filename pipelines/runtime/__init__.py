"""The runtime room: what a process needs around the code (JVM dependencies, Spark's session)."""
