"""The engine: the ``Memory`` facade, keeping the index fresh, the file watcher."""
