"""The workspace: which Markdown files are memory, reading and appending them, transcripts and file locks."""
