"""The warehouse itself: its layout beside the tables (``layout``) and its one writer (``lock``)
(ARCHITECTURE.md, "The pipelines' rooms")."""
