"""compute-sanitizer: locate it and build its command line, parse its output, place its records on buffers."""
