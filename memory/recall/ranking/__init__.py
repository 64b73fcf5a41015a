"""Recall's semantic term: Jaccard, BM25 and the MiniLM embedding."""
