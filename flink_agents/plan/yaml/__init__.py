"""Agents declared in YAML: the schema of the file and the loader that compiles it to a plan."""
