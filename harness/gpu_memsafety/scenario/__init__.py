"""Scenario definition and discovery: the frozen definition, the adapter contract, the run context, the registry."""
