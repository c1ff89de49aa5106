"""Command-line entry points: main (the dispatcher), repro, new, bench, env, upstream."""
