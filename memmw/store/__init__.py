"""The derived index: the store protocol, its SQLite implementation and the packed term format."""
