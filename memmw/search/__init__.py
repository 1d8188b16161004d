"""Search: the keyword and vector legs, fusion, decay, importance, MMR and snippets."""
