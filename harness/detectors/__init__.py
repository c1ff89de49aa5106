"""Detectors beyond memcheck: poison, uninit (fill check), guard-page reruns, racecheck/synccheck hazards."""
