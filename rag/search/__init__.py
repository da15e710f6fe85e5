"""`python -m rag.search`."""
