"""What the jobs read, before Spark: landing files (raw capture files, kcat lines), broker log
segments, simulator scenario files, and the shape a capture's offsets tell (ARCHITECTURE.md,
"The pipelines' rooms")."""
