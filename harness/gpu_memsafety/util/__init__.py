"""Small helpers with no domain knowledge: atomic file writes, progress on stderr."""
