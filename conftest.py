"""Root conftest: hooks only, and none are needed. The plugin is the installed distribution's pytest11 entry
point `gpu_memsafety` (fixtures/plugin.py), loaded by name in pyproject.toml's addopts, as in any repository
that installs the harness."""
