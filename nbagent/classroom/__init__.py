"""A classroom: one room server for a class of notebooks (work in progress)."""
