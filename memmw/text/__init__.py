"""Text: search terms and stemming, chunking, token counts."""
