"""Property tests (hypothesis) of the parsers, loaders and routing."""
